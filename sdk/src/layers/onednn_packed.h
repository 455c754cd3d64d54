// oneDNN's linear for inference on oneDNN's product path (AVX-512 CPUs not made by Intel): each
// weight reordered once into oneDNN's blocked layout and reused by every product without
// gradients, instead of oneDNN repacking it inside every call.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// x [..., k] times weight [n, k]^T (k_major false, nn.Linear) or weight [k, n] (true, HF's
// Conv1D), plus bias [n] (may be undefined), through oneDNN's linear (LibTorch's
// mkldnn::_linear_pointwise): on weight's reordered copy once the cache of packed weights holds
// one (packed_weights.h says when), on the weight as it is before, with the same bits. Undefined
// where it does not apply (oneDNN not kernels::gemm_backend(), packable_rows 0, the op absent
// from this LibTorch), for the caller to take kernels::linear.
at::Tensor onednn_packed_linear(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, bool k_major);

}  // namespace shardformer::layers
