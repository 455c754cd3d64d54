// Weights packed once for inference products and reused by every product without gradients:
// the AMX tiles' bf16 parts (CPUs with AMX), MKL's packed layout (ATen's path, Intel CPUs without
// AMX) or oneDNN's blocked one (AMD's AVX-512). One cache for all, keyed by the weight's tensor
// and checked against its version.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <functional>

namespace shardformer::layers {

// Which packer made a copy. A weight asked for in another format (a test switching the GEMM)
// is packed anew.
enum class PackFormat : uint8_t { kMkl, kOneDnn, kAmx };

// The fewest rows a packed product takes: fewer are the skinny kernel's (kernels::kSkinnyRows).
inline constexpr int64_t kPackedMinRows = 33;

// The rows m of x [..., k] times weight ([n, k], or [k, n] when k_major) where that product may
// read a packed copy of the weight, 0 where it may not: outside a runtime::InferenceScope (a
// recomputed block's no-grad first pass must round as its recomputation does), operands not CPU
// fp32, a weight not 2-D and contiguous or an inference tensor (c10::InferenceMode: no version
// counter to check a copy against), x's last dimension not k, or fewer than kPackedMinRows rows.
int64_t packable_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      bool k_major);

// Packing reads the weight and writes its bytes again (MKL: 2.4 times): next to a product of m
// rows that costs about 100 / m of the product's time on a 2-core Xeon, while MKL's packed
// product runs 1.13-1.37x faster from 2048 rows up. A product this large packs at once, even if
// it is the weight's only one: ViT-base classifying 32 images in one job ran 1.03x faster so (4
// pairs, 2026-11-29). Fewer rows wait for the weight's second product, so a weight used once by
// few rows (a prompt, whose decoding steps take the skinny kernel) is never copied.
inline constexpr int64_t kPackAtFirstRows = 1024;

// weight's packed copy in `format` for a product of `rows` rows: made by pack(), which returns a
// tensor of about `bytes` bytes (the budget's estimate), at the weight's second product (or at its
// first of kPackAtFirstRows rows or more) and returned by every later one until the weight is
// written in place (its version counter moves; collectives that write parameters count their
// writes: ProcessGroup::broadcast_) or freed. Undefined while the weight waits, or when the copies
// would pass an eighth of the machine's memory (a model near the memory's size is not doubled): the
// caller then takes its unpacked product. k_major tells the layout (nn.Linear's [n, k] or HF
// Conv1D's [k, n]): a copy packed for the other is made anew.
at::Tensor packed_weight(const at::Tensor& weight, bool k_major, int64_t rows, PackFormat format,
                         int64_t bytes, const std::function<at::Tensor()>& pack);

// Packed copies held (for tests: one per live weight, none once the weights are gone).
int64_t packed_weights();

}  // namespace shardformer::layers
