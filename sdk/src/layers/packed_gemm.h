// Matrix products through the kernels' packed GEMM where it is enabled (kernels::gemm_enabled:
// CPU fp32 on AVX-512 CPUs whose MKL runs AVX2 code), with gradients; through ATen otherwise.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// a [m, k] . b [k, n] (any strides). The packed GEMM when it serves both and no gradient is
// recorded (inference, or inside an autograd node's backward); at::mm otherwise.
at::Tensor packed_mm(const at::Tensor& a, const at::Tensor& b);

// x [..., k] times a weight [n, k] (k_major false, nn.Linear) or [k, n] (true, HF's Conv1D),
// plus bias [n] (may be undefined). The packed GEMM when it serves, as an autograd node whose
// backward (input, weight and bias gradients) runs on it too; ATen's linear / addmm otherwise.
at::Tensor linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          bool k_major);

}  // namespace shardformer::layers
