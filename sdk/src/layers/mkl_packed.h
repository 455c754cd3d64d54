// MKL's packed-weight GEMM for inference on ATen's product path (Intel CPUs): each weight packed
// once into MKL's internal layout (cblas_sgemm_pack, exported by libtorch_cpu) and reused by
// every product without gradients, instead of MKL repacking it inside every sgemm call.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// x [..., k] times weight [n, k]^T (k_major false, nn.Linear) or weight [k, n] (true, HF's
// Conv1D), plus bias [n] (may be undefined), through weight's packed copy:
// undefined when the packed path does not apply (MKL's packed API absent, disabled by
// SHARDFORMER_MKL_PACKED=0, packable_rows 0, or no copy in the cache of packed weights yet:
// packed_weights.h says when one is made), for the caller to take ATen's product
// instead (the same bits on the model shapes checked, with MKL's AVX-512 and AVX2 code; a tiny
// [50, 40] x [40, 24] differed in the last bit on AVX2 code).
at::Tensor mkl_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major);

}  // namespace shardformer::layers
