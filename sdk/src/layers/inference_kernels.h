// When the SDK's layers take the fused CPU kernels (kernels/): inside a runtime::InferenceScope
// with gradients off (the kernels have no backward) and on CPU fp32 contiguous inputs;
// otherwise the layers use ATen's ops.
#pragma once

#include "library_gemm.h"

#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/runtime/inference_scope.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <initializer_list>

namespace shardformer::layers {

// Whether a kernel can read `t`: a contiguous fp32 CPU tensor.
inline bool kernel_layout(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

inline bool use_inference_kernel(std::initializer_list<at::Tensor> inputs) {
  if (at::GradMode::is_enabled() || !runtime::InferenceScope::active()) return false;
  for (const at::Tensor& t : inputs) {
    if (!kernel_layout(t)) return false;
  }
  return true;
}

// Whether kernels::gemm (a library's) writes x [..., k] times `weight` straight into a collective's
// buffer (a gathered output's slice, a shared-memory slot): no gradients, fp32 CPU tensors in the
// kernels' layout, and more rows than the skinny kernel takes (decoding keeps that kernel).
inline bool gemm_into_collective(const at::Tensor& x, const at::Tensor& weight) {
  return !at::GradMode::is_enabled() && kernels::gemm_enabled() && kernel_layout(x) &&
         kernel_layout(weight) &&
         x.numel() / std::max<int64_t>(x.size(-1), 1) > kernels::kSkinnyRows;
}

// x [..., k] times a weight [n, k] (k_major false) or [k, n] (true), plus bias: the skinny
// kernel for a few rows without gradients (decoding), linear_product otherwise (the library
// kernels::gemm picked, with gradients; ATen's GEMM on Intel's CPUs).
inline at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          bool k_major) {
  if (use_inference_kernel({x}) && kernels::skinny_linear_applies(x, weight)) {
    return kernels::skinny_linear(x, weight, bias, k_major);
  }
  return linear_product(x, weight, bias, k_major);
}

}  // namespace shardformer::layers
