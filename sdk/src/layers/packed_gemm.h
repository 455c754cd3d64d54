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

// x [..., k] times weight [n, k]^T (k_major false) or [k, n] (true), plus bias [n] (may be
// undefined), on weight's copy packed once for the kernels' packed GEMM (packed_weights.h), the
// same bits as kernels::linear: undefined when that does not apply (another GEMM picked, outside
// a runtime::InferenceScope, gradients recorded, not CPU fp32, a non-contiguous or inference-mode
// weight, kernels::kSkinnyRows rows or fewer, or no copy yet), for the caller to take
// kernels::linear. kernels::linear packs each block of the weight again in every product: 15% of
// ViT-base's time classifying one image at a time (a Zen 4, 2 threads).
at::Tensor cached_packed_linear(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, bool k_major);

}  // namespace shardformer::layers
