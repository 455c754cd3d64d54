// Attention for inference on the kernels' own GEMM (gemm_impl.cpp), compiled per instruction set
// like the other kernels: per (batch, head) and block of queries, the scores against every key (or,
// causal, the keys up to the block's last query), an exact softmax per row, and their product
// with the values. Causal blocks above the diagonal are never computed. Decoding's few queries
// over a KV cache take cached_attention: dot products, an exact softmax and a weighted sum.
#include "gemm_impl.h"
#include "kernel_table.h"
#include "vec_common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace shardformer::kernels::CPU_CAPABILITY {
namespace {

// Queries per block: the scores of a block are [kBlock, keys]; the part of the diagonal block
// above the diagonal (kBlock^2 / 2 scores a block) is the work wasted on causality.
constexpr int64_t kBlock = 64;
// Keys per step of the product with the values: that many rows of v (32 KiB at 64 floats) stay
// in L1 while every tile of the block's queries passes over them (GPT-2-small's 4 x 512 tokens on
// a Xeon: 12.5 against 13.2 ms for all keys in one step, bench/kernel_speed).
constexpr int64_t kKeyChunk = 128;

// The last n % kLanes values of a row take one vector of that many lanes, the rest of it
// `fill` (loadu's zeros would count as values).
Vec load_tail(const float* x, int64_t lanes, float fill) {
  return Vec::set(Vec(fill), Vec::loadu(x, lanes), lanes);
}

float max_of(const float* x, int64_t n) {
  const float lowest = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  Vec best(lowest);
  for (; i + kLanes <= n; i += kLanes) best = at::vec::maximum(best, Vec::loadu(x + i));
  if (i < n) best = at::vec::maximum(best, load_tail(x + i, n - i, lowest));
  return at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); },
                                        best);
}

// x[i] = exp((x[i] - max) * scale) over n values; returns their sum.
float exp_and_sum(float* x, int64_t n, float max, float scale) {
  const Vec vmax(max), vscale(scale);
  Vec acc(0.f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Vec e = ((Vec::loadu(x + i) - vmax) * vscale).exp();
    e.store(x + i);
    acc = acc + e;
  }
  if (i < n) {
    const Vec e = ((load_tail(x + i, n - i, max) - vmax) * vscale).exp();
    e.store(x + i, static_cast<int>(n - i));
    acc = acc + Vec::set(Vec(0.f), e, n - i);
  }
  return at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, acc);
}

void scale_row(float* x, int64_t n, float factor) {
  const Vec f(factor);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) (Vec::loadu(x + i) * f).store(x + i);
  for (; i < n; ++i) x[i] *= factor;
}

// One head's keys and values, laid out once for all its blocks of queries (each block reads
// them all, or a prefix): k^T packed whole as the GEMM's tiles read it, and v copied to contiguous
// rows; and a block's queries, copied to contiguous rows. (Packing k for every block repacked each
// key up to keys / kBlock times; rows of q, k and v where they lie are a page apart in a fused QKV
// projection's output, where rows a multiple of 4 KiB apart share few L1 sets.)
struct HeadOperands {
  float* packed_keys;  // [packed_b_size(dim, keys)]
  float* values;       // [keys, dim]
  float* queries;      // [kBlock, dim]
};

// One (batch, head): out [queries, dim] = softmax(q k^T * scale, causal or not) v, each row's
// probabilities left unnormalized through the product and its output row divided by their sum.
void attend_one(const float* q, const float* k, const float* v, float* out, const AttentionShape& s,
                float scale, const HeadOperands& head, float* scores, float* work) {
  pack_b_whole(s.dim, s.keys, k, 1, s.k.row, head.packed_keys);  // k^T [dim, keys]
  for (int64_t j = 0; j < s.keys; ++j) {
    const float* from = v + j * s.v.row;
    float* to = head.values + j * s.dim;
    int64_t d = 0;
    for (; d + kLanes <= s.dim; d += kLanes) Vec::loadu(from + d).store(to + d);
    for (; d < s.dim; ++d) to[d] = from[d];
  }
  std::array<float, kBlock> sums{};
  for (int64_t i0 = 0; i0 < s.queries; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, s.queries - i0), keys = s.causal ? i0 + rows : s.keys;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(q + (i0 + r) * s.q.row, s.dim, head.queries + r * s.dim);
    }
    // scores [rows, keys] = q[i0 : i0 + rows] . k[0 : keys]^T, unscaled
    gemm(rows, keys, s.dim, head.queries, s.dim, 1, nullptr, 1, s.k.row, nullptr, false, scores,
         keys, 1, work, head.packed_keys);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = scores + r * keys;
      const int64_t seen = s.causal ? i0 + r + 1 : keys;  // causal: keys 0 .. i0 + r
      sums[r] = exp_and_sum(row, seen, max_of(row, seen), scale);
      std::fill(row + seen, row + keys, 0.f);
    }
    // out[i0 : i0 + rows] = exp-scores [rows, keys] . v[0 : keys], then / each row's sum
    float* block_out = out + i0 * s.out.row;
    for (int64_t c0 = 0; c0 < keys; c0 += kKeyChunk) {
      const int64_t chunk = std::min(kKeyChunk, keys - c0);
      gemm(rows, s.dim, chunk, scores + c0, keys, 1, head.values + c0 * s.dim, s.dim, 1, nullptr,
           c0 > 0, block_out, s.out.row, 1, work, nullptr);
    }
    for (int64_t r = 0; r < rows; ++r) scale_row(block_out + r * s.out.row, s.dim, 1.f / sums[r]);
  }
}

float dot(const float* a, const float* b, int64_t n) {
  Vec acc(0.f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    acc = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), acc);
  float sum = at::vec::vec_reduce_all<float>([](Vec& x, Vec& y) { return x + y; }, acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[0 : n] += p * x[0 : n]
void add_scaled(float* y, const float* x, float p, int64_t n) {
  const Vec vp(p);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    at::vec::fmadd(vp, Vec::loadu(x + i), Vec::loadu(y + i)).store(y + i);
  for (; i < n; ++i) y[i] += p * x[i];
}

// One query of one head: out [dim] = softmax(q . k[j] * scale over the keys it sees) v.
// Keys past `keys` are not seen (causal).
void attend_query(const float* q, const float* k, const float* v, const bool* seen, int64_t keys,
                  float* out, const CachedAttentionShape& s, float scale, float* scores) {
  const float lowest = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (int64_t j = 0; j < s.keys; ++j) {
    const bool visible = j < keys && (seen == nullptr || seen[j]);
    any = any || visible;
    scores[j] = visible ? dot(q, k + j * s.k.row, s.dim) * scale : lowest;
  }
  std::fill(out, out + s.dim, 0.f);
  if (!any) return;
  const float sum = exp_and_sum(scores, s.keys, max_of(scores, s.keys), 1.f);
  for (int64_t j = 0; j < s.keys; ++j) {
    if (scores[j] != 0.f) add_scaled(out, v + j * s.v.row, scores[j], s.dim);
  }
  scale_row(out, s.dim, 1.f / sum);
}

}  // namespace

void cached_attention(const float* q, const float* k, const float* v, const bool* mask, float* out,
                      const CachedAttentionShape& s, float scale) {
  const int64_t group = s.heads / s.kv_heads;
  // At least about 64K multiply-adds a thread: a decoding step's heads over short caches are
  // cheaper than waking a second thread.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, 2 * s.keys * s.dim));
  at::parallel_for(0, s.batch * s.heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(s.keys));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / s.heads, h = t % s.heads, kv = h / group;
      for (int64_t i = 0; i < s.queries; ++i) {
        attend_query(q + b * s.q.batch + h * s.q.head + i * s.q.row,
                     k + b * s.k.batch + kv * s.k.head, v + b * s.v.batch + kv * s.v.head,
                     mask != nullptr ? mask + b * s.mask_batch + i * s.mask_query : nullptr,
                     s.causal ? s.keys - s.queries + i + 1 : s.keys,
                     out + b * s.out.batch + h * s.out.head + i * s.out.row, s, scale,
                     scores.data());
      }
    }
  });
}

void block_attention(const float* q, const float* k, const float* v, float* out,
                     const AttentionShape& s, float scale) {
  const int64_t tasks = s.batch * s.heads;
  const int64_t block = std::min(kBlock, s.queries);
  // Workspace for the larger of the two products of a block.
  const int64_t work_floats =
      std::max(gemm_workspace(block, s.keys, s.dim, s.k.row, 1, true),
               gemm_workspace(block, s.dim, std::min(kKeyChunk, s.keys), 1, 1, false));
  at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(block * s.keys));
    std::vector<float> work(static_cast<size_t>(work_floats));
    std::vector<float> packed_keys(static_cast<size_t>(packed_b_size(s.dim, s.keys)));
    std::vector<float> values(static_cast<size_t>(s.keys * s.dim));
    std::vector<float> queries(static_cast<size_t>(block * s.dim));
    const HeadOperands head{packed_keys.data(), values.data(), queries.data()};
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / s.heads, h = t % s.heads;
      float* head_out = out + b * s.out.batch + h * s.out.head;
      AttentionShape seen = s;  // this batch's keys: all, or its unpadded prefix
      if (s.key_counts != nullptr) seen.keys = s.key_counts[b];
      if (seen.keys == 0) {  // nothing to see: zeros, as a query whose keys are all masked
        for (int64_t i = 0; i < s.queries; ++i) std::fill_n(head_out + i * s.out.row, s.dim, 0.f);
        continue;
      }
      attend_one(q + b * s.q.batch + h * s.q.head, k + b * s.k.batch + h * s.k.head,
                 v + b * s.v.batch + h * s.v.head, head_out, seen, scale, head, scores.data(),
                 work.data());
    }
  });
}

}  // namespace shardformer::kernels::CPU_CAPABILITY
