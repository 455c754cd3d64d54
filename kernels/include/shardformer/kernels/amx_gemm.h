// fp32 matrix products on Intel's AMX tiles: each operand split into three bf16 parts whose six
// leading cross products, summed in fp32 by the tiles, give the fp32 product to fp32's rounding
// (bf16x6; Henry, Tang and Heinecke, ARITH 2019). For inference products on weights packed once.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>

namespace shardformer::kernels {

// Whether the AMX products serve this process: the CPU has AMX-TILE, AMX-BF16 and AVX512-BF16,
// Linux grants the process the tiles' state (arch_prctl ARCH_REQ_XCOMP_PERM), and
// SHARDFORMER_AMX is not "0". Decided once per process.
bool amx_available();

// Replaces whether the AMX products serve (for tests and benchmarks; true only where
// amx_available's hardware and permission hold) and returns the value it replaces.
bool set_amx_enabled(bool enabled);
bool amx_enabled();

// The bf16 elements of a weight's packed copy: n and k rounded up to 32, three parts.
int64_t amx_packed_elements(int64_t n, int64_t k);

// weight [n, k] (k_major false, nn.Linear) or [k, n] (true, HF's Conv1D), fp32 contiguous, as
// the tiles read it: a bf16 tensor of amx_packed_elements(n, k) values.
at::Tensor amx_pack_weight(const at::Tensor& weight, bool k_major);

// out [m, n] = x [m, k] . W^T + bias [n] (may be undefined) for W packed by amx_pack_weight; x
// fp32 with contiguous rows. Threads: ATen's intra-op count.
at::Tensor amx_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n,
                      const at::Tensor& bias);

}  // namespace shardformer::kernels
