// What every per-instruction-set kernel file shares: the OpenMP check that keeps
// at::parallel_for parallel, the unroll pragma, and ATen's float vector with its lane count.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cstdint>

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "kernels need -fopenmp (SHARDFORMER_OPENMP_FLAGS): without it at::parallel_for is serial"
#endif

// GCC at -O2 keeps small accumulator arrays on the stack unless their loops are unrolled
// (a store-to-load chain per FMA: the 4-row product ran at half speed).
#define SHARDFORMER_UNROLL _Pragma("GCC unroll 16")

namespace shardformer::kernels::CPU_CAPABILITY {

using Vec = at::vec::Vectorized<float>;
inline constexpr int64_t kLanes = Vec::size();

}  // namespace shardformer::kernels::CPU_CAPABILITY
