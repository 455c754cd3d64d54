// Inference products on AMX tiles (kernels/amx_gemm.h: fp32 by six bf16 part products), on
// weights packed once through the cache of packed weights (packed_weights.h).
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// The longest k whose weights the tiles read packed: on a 2-core Xeon they ran GPT-2's products
// of k = 768 at 1.5-1.7x MKL's unpacked rate but its [2048, 3072] x [3072, 768] at 0.86-0.88x,
// where MKL's packed weights serve better.
inline constexpr int64_t kAmxMaxK = 1024;

// Whether the tiles serve inference products of this weight (k_major as below) from a packed
// copy: they run the products (kernels::GemmBackend::kAmx) and its k is at most kAmxMaxK.
bool amx_serves(const at::Tensor& weight, bool k_major);

// x [..., k] times weight [n, k] (k_major false) or [k, n] (true), plus bias [n] (may be
// undefined), where amx_serves and a packed copy applies (packable_rows, packed_weight);
// undefined otherwise, for the caller's unpacked product.
at::Tensor amx_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major);

}  // namespace shardformer::layers
