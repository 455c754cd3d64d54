// MKL's packed-weight GEMM for inference on ATen's product path (Intel CPUs): each weight packed
// once into MKL's internal layout (cblas_sgemm_pack, exported by libtorch_cpu) and reused by
// every product without gradients, instead of MKL repacking it inside every sgemm call.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// x [..., k] times weight [n, k]^T (k_major false, nn.Linear) or weight [k, n] (true, HF's
// Conv1D), plus bias [n] (may be undefined), through weight's packed copy:
// undefined when the packed path does not apply (MKL's packed API absent, disabled by
// SHARDFORMER_MKL_PACKED=0, outside a runtime::InferenceScope, not CPU fp32, a non-contiguous
// or inference-mode weight, fewer than kMklPackedMinRows rows, the weight's first product of
// fewer than kMklPackAtFirstRows rows, or the copies would pass an eighth of the machine's
// memory), for the caller to take ATen's product instead (the same bits on the model shapes
// checked, with MKL's AVX-512 and AVX2 code; a tiny [50, 40] x [40, 24] differed in the last bit
// on AVX2 code). A weight is packed at its second product, or at its first where that has
// kMklPackAtFirstRows rows or more, so a weight used once by few rows (a prompt) costs no
// packing. A weight written in place gets a new copy (its version counter moves; collectives
// that write parameters count their writes: ProcessGroup::broadcast_).
at::Tensor mkl_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major);

inline constexpr int64_t kMklPackedMinRows = 33;  // fewer rows: the skinny kernel's or ATen's
// Packing reads the weight and writes 2.4 times its bytes: next to a product of m rows that costs
// about 100 / m of the product's time on a 2-core Xeon, while the packed product runs 1.13-1.37x
// faster from 2048 rows up. A product this large packs at once, even if it is the weight's only
// one: ViT-base classifying 32 images in one job ran 1.03x faster so (4 pairs, 2026-11-29).
inline constexpr int64_t kMklPackAtFirstRows = 1024;

// Packed copies held (for tests: one per live weight, none once the weights are gone).
int64_t mkl_packed_weights();

}  // namespace shardformer::layers
