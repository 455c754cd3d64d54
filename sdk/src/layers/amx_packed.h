// Inference products on AMX tiles (kernels/amx_gemm.h: fp32 by six bf16 part products), on
// weights packed once through the cache of packed weights (packed_weights.h).
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// The longest k the tiles take: on a 2-core Xeon they ran GPT-2's products of k = 768 at
// 1.5-1.7x MKL's unpacked rate but its [2048, 3072] x [3072, 768] at 0.86-0.88x (splitting the
// 25 MB of activations, and C tiles reloaded between passes over k), where MKL's packed weights
// serve better.
inline constexpr int64_t kAmxMaxK = 1024;

// Whether the tiles serve products of this weight (k_major as below): they are enabled
// (kernels::amx_enabled) and its k is at most kAmxMaxK.
bool amx_serves(const at::Tensor& weight, bool k_major);

// x [..., k] times weight [n, k] (k_major false) or [k, n] (true), plus bias [n] (may be
// undefined), where amx_serves and a packed copy applies (packable_rows, packed_weight);
// undefined otherwise, for the caller's unpacked product.
at::Tensor amx_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major);

}  // namespace shardformer::layers
