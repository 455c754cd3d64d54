// Inference products on AMX tiles (kernels/amx_gemm.h: fp32 by six bf16 part products), on
// weights packed once through the cache of packed weights (packed_weights.h).
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// x [..., k] times weight [n, k] (k_major false) or [k, n] (true), plus bias [n] (may be
// undefined), where the tiles run the inference products (kernels::GemmBackend::kAmx) and a
// packed copy applies (packable_rows, packed_weight); undefined otherwise, for the caller's
// unpacked product.
at::Tensor amx_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major);

}  // namespace shardformer::layers
