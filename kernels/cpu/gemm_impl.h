// The raw entry points of the GEMM (gemm_impl.cpp) and of the attention built on it
// (attention_impl.cpp), declared in the namespace of the instruction set being compiled;
// kernels_impl.cpp puts them in that set's KernelTable.
#pragma once

#include "kernel_table.h"

#include <cstdint>

namespace shardformer::kernels::CPU_CAPABILITY {

// Floats of workspace `gemm` needs for m x n x k, B's columns bcs apart, on `threads` threads,
// with B packed whole (`packed`) or not.
int64_t gemm_workspace(int64_t m, int64_t n, int64_t k, int64_t bcs, int64_t threads, bool packed);

// Floats of B [k, n] packed whole, and the packing: every block of B laid out as the GEMM's
// tiles read it, once, for products that share B (element (p, j) at b[p * brs + j * bcs]).
int64_t packed_b_size(int64_t k, int64_t n);
void pack_b_whole(int64_t k, int64_t n, const float* b, int64_t brs, int64_t bcs, float* packed);

// c[i * ldc + j] (=|+=) sum_p a[i * ars + p * acs] * b[p * brs + j * bcs] (+ bias[j]) for
// i < m, j < n: `accumulate` adds to c, bias may be null. Splits over at most `threads` threads.
// packed: B packed whole (pack_b_whole), read instead of b (then null); the same bits.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
          int64_t brs, int64_t bcs, const float* bias, bool accumulate, float* c, int64_t ldc,
          int64_t threads, float* workspace, const float* packed);

// Attention for inference, causal or over every key (attention_impl.cpp), on the GEMM above.
void block_attention(const float* q, const float* k, const float* v, float* out,
                     const AttentionShape& shape, float scale);

// A few queries over a KV cache (decoding), heads grouped over KV heads (attention_impl.cpp).
void cached_attention(const float* q, const float* k, const float* v, const bool* mask, float* out,
                      const CachedAttentionShape& shape, float scale);

}  // namespace shardformer::kernels::CPU_CAPABILITY
