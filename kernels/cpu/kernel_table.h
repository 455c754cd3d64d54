// The kernels' raw entry points, compiled once per instruction set (kernels/CMakeLists.txt) into
// namespaces named by CPU_CAPABILITY; dispatch.cpp picks one table at run time.
#pragma once

#include <cstdint>

namespace shardformer::kernels {

// Element strides of a [batch, heads, seq, dim] operand whose dim is contiguous.
struct AttentionStrides {
  int64_t batch, head, row;
};

// The operands of block_attention: q and out [batch, heads, queries, dim], k and v [batch, heads,
// keys, dim]; causal (queries == keys): query i sees keys 0 .. i, otherwise every key, or where
// key_counts is given (not causal), keys 0 .. key_counts[b] - 1 of batch b (right padding).
struct AttentionShape {
  int64_t batch, heads, queries, keys, dim;
  AttentionStrides q, k, v, out;
  bool causal;
  const int64_t* key_counts = nullptr;  // [batch], each in [0, keys]
};

// The operands of cached_attention: q and out [batch, heads, queries, dim]; k and v [batch,
// kv_heads, keys, dim] (a KV cache's filled part); mask, where given, boolean [batch, queries,
// keys] with the keys contiguous (stride 0 for a batch or query dimension it broadcasts);
// causal: the queries are the last `queries` positions, query i seeing keys up to
// keys - queries + i.
struct CachedAttentionShape {
  int64_t batch, heads, kv_heads, queries, keys, dim;
  AttentionStrides q, k, v, out;
  int64_t mask_batch, mask_query;
  bool causal;
};

struct KernelTable {
  // y[m, n] = x[m, k] . W + bias: W is [n, k] (k_major false) or [k, n] (k_major true).
  void (*skinny_linear)(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                        bool k_major, const float* bias, float* y);
  // y[r, :] = gelu_tanh(x[r, :] + bias) for rows x cols.
  void (*bias_gelu_tanh)(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);
  // dx = grad * gelu_tanh'(x), elementwise over n values.
  void (*gelu_tanh_backward)(const float* x, const float* grad, float* dx, int64_t n);
  // sum = x + residual; y = LayerNorm(sum) * weight + bias, per row.
  void (*add_layer_norm)(const float* x, const float* residual, const float* weight,
                         const float* bias, float* sum, float* y, int64_t rows, int64_t cols,
                         float eps);
  // y = weight * x / sqrt(mean(x^2) + eps), per row.
  void (*rms_norm)(const float* x, const float* weight, float* y, int64_t rows, int64_t cols,
                   float eps);
  // Rotary embedding (HF: x * cos + rotate_half(x) * sin) on the first rotary_dim features of
  // each head, the rest copied. x, y: [tokens, heads, head_dim]; cos, sin: [tokens, rotary_dim].
  void (*rotary)(const float* x, const float* cos, const float* sin, float* y, int64_t tokens,
                 int64_t heads, int64_t head_dim, int64_t rotary_dim);
  // Per row of x [rows, cols]: max[r] = max_j x[r, j], sum[r] = sum_j exp(x[r, j] - max[r]).
  void (*softmax_stats)(const float* x, int64_t rows, int64_t cols, float* max, float* sum);
  // Per row: grad[r, j] = (exp(x[r, j] - max[r]) / sum[r] - [j == target[r]]) * scale[r];
  // target[r] < 0 subtracts nothing (the target is on another rank or ignored).
  void (*softmax_xent_grad)(const float* x, const float* max, const float* sum,
                            const int64_t* target, const float* scale, float* grad, int64_t rows,
                            int64_t cols);
  // out[r, :] = ((terms[0][r, :] + terms[1][r, :]) + ... + terms[n - 1][r, :]) + bias for rows x
  // cols (n >= 2; bias may be null): the sum of a shared-memory all-reduce, in rank order.
  void (*sum_terms)(const float* const* terms, int64_t n, const float* bias, float* out,
                    int64_t rows, int64_t cols);
  // sum[r, :] = residual[r, :] + (the terms' sum, as sum_terms, n >= 1) and, where weight is not
  // null, y[r, :] = LayerNorm(sum[r, :]) * weight + norm_bias (norm_bias may be null), as
  // add_layer_norm, or with rms RMSNorm(sum[r, :]) as rms_norm (norm_bias null): an all-reduce,
  // the residual add and the next norm in one pass.
  void (*sum_add_norm)(const float* const* terms, int64_t n, const float* bias,
                       const float* residual, bool rms, const float* weight, const float* norm_bias,
                       float* sum, float* y, int64_t rows, int64_t cols, float eps);
  // Floats of workspace `gemm` needs for m x n x k, B's columns bcs apart, on `threads` threads,
  // with B packed whole or not.
  int64_t (*gemm_workspace)(int64_t m, int64_t n, int64_t k, int64_t bcs, int64_t threads,
                            bool packed);
  // out = softmax(q k^T * scale) v for every (batch, head), over every key or (causal) query i
  // seeing keys 0 .. i.
  void (*block_attention)(const float* q, const float* k, const float* v, float* out,
                          const AttentionShape& shape, float scale);
  // out = softmax(q k^T * scale) v for every (batch, head), head h reading the keys and values
  // of KV head h / (heads / kv_heads); query i sees key j where mask[b, i, j] is true (every
  // key without a mask) and, when causal, j <= keys - queries + i. A query that sees no key
  // gets zeros.
  void (*cached_attention)(const float* q, const float* k, const float* v, const bool* mask,
                           float* out, const CachedAttentionShape& shape, float scale);
  // c[i * ldc + j] (=|+=) sum_p a[i * ars + p * acs] * b[p * brs + j * bcs] (+ bias[j]):
  // the register-tile GEMM of gemm_impl.cpp that block_attention runs on (here for the tests
  // of each instruction set); with `packed` (B packed whole, b null) the same bits.
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
               const float* b, int64_t brs, int64_t bcs, const float* bias, bool accumulate,
               float* c, int64_t ldc, int64_t threads, float* workspace, const float* packed);
  // Floats of B [k, n] packed whole, and the packing (element (p, j) at b[p * brs + j * bcs]):
  // for products that share B, which each pack it otherwise.
  int64_t (*packed_b_size)(int64_t k, int64_t n);
  void (*pack_b_whole)(int64_t k, int64_t n, const float* b, int64_t brs, int64_t bcs,
                       float* packed);
  // y[i][m, n[i]] = x[m, k] . W[i]^T + bias[i] for `count` weights [n[i], k] (bias[i] may be
  // null), in one parallel pass over all their rows (q / k / v of a decoding step).
  void (*skinny_group)(const float* x, int64_t m, int64_t k, int64_t count, const float* const* w,
                       const int64_t* n, const float* const* bias, float* const* y);
  // h[m, n] = silu(x . Wg^T + bg) * (x . Wu^T + bu) for weights [n, k] (biases may be null);
  // up: scratch [m, n]. One parallel pass (a gated MLP's decoding step).
  void (*skinny_silu_gate)(const float* x, int64_t m, int64_t k, const float* wg, const float* bg,
                           const float* wu, const float* bu, int64_t n, float* up, float* h);
};

namespace DEFAULT {
extern const KernelTable table;
}
namespace AVX2 {
extern const KernelTable table;
}
namespace AVX512 {
extern const KernelTable table;
}

}  // namespace shardformer::kernels
