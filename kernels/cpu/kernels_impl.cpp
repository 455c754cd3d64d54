// The CPU kernels, written once with ATen's Vectorized<float> and compiled per instruction set
// (CPU_CAPABILITY = DEFAULT, AVX2, AVX512; kernels/CMakeLists.txt): skinny products, bias +
// tanh-GELU, residual add + LayerNorm, RMSNorm, rotary embedding, softmax cross-entropy and sums.
#include "gemm_impl.h"
#include "kernel_table.h"
#include "prefetch_choice.h"
#include "vec_common.h"

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace shardformer::kernels::CPU_CAPABILITY {
namespace {

float sum_lanes(const Vec& v) {
  return at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, v);
}

// How far ahead of its loads a product asks for weights, into L2 (prefetcht1), where it does
// (prefetch_choice.h: measured per CPU and row count): with several rows every weight line costs
// several FMAs, and with the hardware prefetcher alone the 8-row products read at half the 1-row
// rate; 4-16 KiB ahead measured alike (docs/benchmarks.md). One request per vector load (two per
// line with 8 lanes), chosen at compile time: GCC drops a prefetch behind a runtime condition.
constexpr int64_t kPrefetchFloats = 2048;

template <bool Prefetch>
inline void prefetch_ahead(const float* p) {
  if constexpr (Prefetch) __builtin_prefetch(p + kPrefetchFloats, 0, 2);
}

// W [n, k] (nn.Linear): out[m][s] = x[m] . w[s] for M rows of x against S weight rows from S
// places in memory (S streams), so every loaded weight vector feeds M fused multiply-adds. Below
// four rows each output keeps 4 / M partial sums, so that at least four FMA chains are in flight
// (one chain is bound by the FMA latency); S only adds outputs, each summed in the same order.
template <int M, int S, bool Prefetch>
void dot_streams(const float* x, int64_t k, const float* const* w, float (&out)[M][S]) {
  constexpr int A = M >= 4 ? 1 : 4 / M;  // partial sums per output
  Vec acc[M][S][A];
  SHARDFORMER_UNROLL
  for (int m = 0; m < M; ++m) SHARDFORMER_UNROLL
  for (int s = 0; s < S; ++s) SHARDFORMER_UNROLL
  for (int a = 0; a < A; ++a) acc[m][s][a] = Vec(0.f);
  int64_t i = 0;
  for (; i + A * kLanes <= k; i += A * kLanes) {
    SHARDFORMER_UNROLL
    for (int a = 0; a < A; ++a) {
      SHARDFORMER_UNROLL
      for (int s = 0; s < S; ++s) {
        prefetch_ahead<Prefetch>(w[s] + i + a * kLanes);
        const Vec wv = Vec::loadu(w[s] + i + a * kLanes);
        SHARDFORMER_UNROLL
        for (int m = 0; m < M; ++m)
          acc[m][s][a] = at::vec::fmadd(Vec::loadu(x + m * k + i + a * kLanes), wv, acc[m][s][a]);
      }
    }
  }
  for (; i + kLanes <= k; i += kLanes) {
    SHARDFORMER_UNROLL
    for (int s = 0; s < S; ++s) {
      const Vec wv = Vec::loadu(w[s] + i);
      SHARDFORMER_UNROLL
      for (int m = 0; m < M; ++m)
        acc[m][s][0] = at::vec::fmadd(Vec::loadu(x + m * k + i), wv, acc[m][s][0]);
    }
  }
  SHARDFORMER_UNROLL
  for (int m = 0; m < M; ++m) {
    SHARDFORMER_UNROLL
    for (int s = 0; s < S; ++s) {
      SHARDFORMER_UNROLL
      for (int a = 1; a < A; ++a) acc[m][s][0] = acc[m][s][0] + acc[m][s][a];
      float sum = sum_lanes(acc[m][s][0]);
      for (int64_t t = i; t < k; ++t) sum += x[m * k + t] * w[s][t];
      out[m][s] = sum;
    }
  }
}

// y[m, j] = x[m] . W[j] + bias[j] for M rows of x and one weight row.
template <int M, bool Prefetch>
void dot_row(const float* x, int64_t k, const float* w, int64_t n, int64_t j, const float* bias,
             float* y) {
  const float* wj[1] = {w + j * k};
  float out[M][1];
  dot_streams<M, 1, Prefetch>(x, k, wj, out);
  SHARDFORMER_UNROLL
  for (int m = 0; m < M; ++m) y[m * n + j] = out[m][0] + (bias != nullptr ? bias[j] : 0.f);
}

// A prompt's rows (more than a row group of 8) against W [n, k] (nn.Linear): y[r, j + c] =
// x[r] . W[j + c] for a tile of MR rows of x and NR weight rows. Each loaded weight vector feeds
// MR rows and each loaded x vector NR weight rows, so the tile is bound by its FMAs, not its loads
// (dot_row<8> loads nine vectors per eight FMAs). One accumulator per output, summed as
// dot_row<M >= 4> sums it: the same bits.
template <int MR, int NR>
void dot_tile(const float* x, int64_t k, const float* w, int64_t n, int64_t j, const float* bias,
              float* y) {
  Vec acc[MR][NR];
  SHARDFORMER_UNROLL
  for (int r = 0; r < MR; ++r) SHARDFORMER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = Vec(0.f);
  const float* wj = w + j * k;
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    Vec xv[MR];
    SHARDFORMER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = Vec::loadu(x + r * k + i);
    SHARDFORMER_UNROLL
    for (int c = 0; c < NR; ++c) {
      const Vec wv = Vec::loadu(wj + c * k + i);
      SHARDFORMER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = at::vec::fmadd(xv[r], wv, acc[r][c]);
    }
  }
  SHARDFORMER_UNROLL
  for (int r = 0; r < MR; ++r) {
    SHARDFORMER_UNROLL
    for (int c = 0; c < NR; ++c) {
      float s = sum_lanes(acc[r][c]);
      for (int64_t t = i; t < k; ++t) s += x[r * k + t] * wj[c * k + t];
      y[r * n + j + c] = s + (bias != nullptr ? bias[j + c] : 0.f);
    }
  }
}

// More rows than one row group take the tiles (a prompt); a group's rows, dot_row (decoding).
constexpr int64_t kRowGroup = 8;

// A thread's share of one nn.Linear product: y[m * n + j] = x[m] . W[j] + bias[j], j in [lo, hi).
struct RowSpan {
  const float* w;
  int64_t n;
  const float* bias;
  float* y;
  int64_t lo, hi;
};

// A thread's spans as one run of rows, cut into S equal parts that are read side by side: S
// sequential streams for the hardware prefetchers instead of one; the rows past S equal parts,
// and S = 1, go one at a time through dot_row.
template <int M, int S, bool Prefetch>
void stream_spans(const float* x, int64_t k, const RowSpan* spans, int count) {
  struct Cursor {
    int span;
    int64_t j;
  };
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += spans[i].hi - spans[i].lo;
  const auto locate = [&](int64_t offset) {
    int i = 0;
    while (i + 1 < count && offset >= spans[i].hi - spans[i].lo) {
      offset -= spans[i].hi - spans[i].lo;
      ++i;
    }
    return Cursor{i, spans[i].lo + offset};
  };
  const int64_t run = S > 1 ? total / S : 0;
  Cursor c[S];
  SHARDFORMER_UNROLL
  for (int s = 0; s < S; ++s) c[s] = locate(s * run);
  for (int64_t t = 0; t < run; ++t) {
    const float* w[S];
    SHARDFORMER_UNROLL
    for (int s = 0; s < S; ++s) w[s] = spans[c[s].span].w + c[s].j * k;
    float out[M][S];
    if constexpr (M == 8) {  // two passes of 4 rows, the second over weights in L1: same sums
      float half[4][S];
      SHARDFORMER_UNROLL
      for (int p = 0; p < 2; ++p) {
        dot_streams<4, S, false>(x + p * 4 * k, k, w, half);
        SHARDFORMER_UNROLL
        for (int m = 0; m < 4; ++m) SHARDFORMER_UNROLL
        for (int s = 0; s < S; ++s) out[p * 4 + m][s] = half[m][s];
      }
    } else {
      dot_streams<M, S, false>(x, k, w, out);
    }
    SHARDFORMER_UNROLL
    for (int s = 0; s < S; ++s) {
      const RowSpan& sp = spans[c[s].span];
      const float b = sp.bias != nullptr ? sp.bias[c[s].j] : 0.f;
      SHARDFORMER_UNROLL
      for (int m = 0; m < M; ++m) sp.y[m * sp.n + c[s].j] = out[m][s] + b;
      if (++c[s].j == sp.hi && c[s].span + 1 < count)
        c[s] = {c[s].span + 1, spans[c[s].span + 1].lo};
    }
  }
  for (int64_t offset = S * run; offset < total; ++offset) {
    const Cursor q = locate(offset);
    const RowSpan& sp = spans[q.span];
    dot_row<M, Prefetch>(x, k, sp.w, sp.n, q.j, sp.bias, sp.y);
  }
}

// Streams per thread for M rows: as many as keep the accumulators (M S partial-sum sets of
// dot_row<M>) within 14 vector registers, at most 4; 8 rows, in two passes of 4, as 4 rows.
constexpr int streams_for(int m) {
  return m == 8 ? 3 : std::min(4, 14 / (m * (m >= 4 ? 1 : 4 / m)));
}
static_assert(streams_for(kRowGroup) > 1 && streams_for(kRowGroup - 1) > 1);

// A thread's spans read the product's way (prefetch_choice.h).
template <int M, ReadWay W>
void read_spans(const float* x, int64_t k, const RowSpan* spans, int count) {
  constexpr int S = streams_for(M);
  if constexpr (W == ReadWay::kStreams && S > 1) {
    stream_spans<M, S, false>(x, k, spans, count);
  } else {
    stream_spans<M, 1, W == ReadWay::kOn>(x, k, spans, count);
  }
}

// Rows [0, m) of x against NR weight rows from j: tiles of kTileRows rows, then the rest.
// AVX-512's 32 registers hold a 4 x 6 tile: 10 loads per 24 FMAs instead of 7 per 12, and half
// as many tiles to sum across lanes. Prompts of 24-32 rows ran 1.15-1.3x faster so on a Zen 4
// (kernel_speed --few-rows); 6 x 4, whose six x vectors leave no register spare, ran at half
// the speed.
#if defined(CPU_CAPABILITY_AVX512)
constexpr int kTileRows = 4, kTileCols = 6;  // 24 accumulators, 4 x vectors, 1 weight vector
#else
constexpr int kTileRows = 3, kTileCols = 4;  // 12 accumulators, 3 x vectors, 1 weight vector
#endif

template <int NR>
void tile_column(const float* x, int64_t m, int64_t k, const float* w, int64_t n, int64_t j,
                 const float* bias, float* y) {
  int64_t r = 0;
  for (; r + kTileRows <= m; r += kTileRows) {
    dot_tile<kTileRows, NR>(x + r * k, k, w, n, j, bias, y + r * n);
  }
  switch (m - r) {
    case 3: dot_tile<3, NR>(x + r * k, k, w, n, j, bias, y + r * n); break;
    case 2: dot_tile<2, NR>(x + r * k, k, w, n, j, bias, y + r * n); break;
    case 1: dot_tile<1, NR>(x + r * k, k, w, n, j, bias, y + r * n); break;
    default: break;
  }
}

// y[:, j0 : j1] for all m rows of x, weight rows [j0, j1) taken kTileCols at a time: each tile of
// weight rows is read from memory once and from L1 for every kTileRows rows of x.
void tiled_rows(const float* x, int64_t m, int64_t k, const float* w, int64_t n, int64_t j0,
                int64_t j1, const float* bias, float* y) {
  int64_t j = j0;
  for (; j + kTileCols <= j1; j += kTileCols) tile_column<kTileCols>(x, m, k, w, n, j, bias, y);
  switch (j1 - j) {
    case 5: tile_column<5>(x, m, k, w, n, j, bias, y); break;
    case 4: tile_column<4>(x, m, k, w, n, j, bias, y); break;
    case 3: tile_column<3>(x, m, k, w, n, j, bias, y); break;
    case 2: tile_column<2>(x, m, k, w, n, j, bias, y); break;
    case 1: tile_column<1>(x, m, k, w, n, j, bias, y); break;
    default: break;
  }
}

// W [k, n] (Conv1D): y[m, :] = bias + sum over i in [i0, i1) of x[m, i] W[i, :], four weight
// rows at a time. The rows [i0, i1) are one contiguous block of W, read in order; the output
// rows stay in L1/L2 between the weight rows.
template <int M, bool Prefetch>
void axpy_rows(const float* x, int64_t k, const float* w, int64_t n, int64_t i0, int64_t i1,
               const float* bias, float* y) {
  const int64_t c0 = 0, c1 = n;
  SHARDFORMER_UNROLL
  for (int m = 0; m < M; ++m) {
    for (int64_t j = c0; j < c1; ++j) y[m * n + j] = bias != nullptr ? bias[j] : 0.f;
  }
  constexpr int Q = 4;  // weight rows per sweep
  int64_t i = i0;
  for (; i + Q <= i1; i += Q) {
    Vec xs[M][Q];
    SHARDFORMER_UNROLL
    for (int m = 0; m < M; ++m) SHARDFORMER_UNROLL
    for (int q = 0; q < Q; ++q) xs[m][q] = Vec(x[m * k + i + q]);
    const float* wi = w + i * n;
    int64_t j = c0;
    for (; j + kLanes <= c1; j += kLanes) {
      Vec wv[Q];
      SHARDFORMER_UNROLL
      for (int q = 0; q < Q; ++q) {
        prefetch_ahead<Prefetch>(wi + q * n + j);
        wv[q] = Vec::loadu(wi + q * n + j);
      }
      SHARDFORMER_UNROLL
      for (int m = 0; m < M; ++m) {
        Vec acc = Vec::loadu(y + m * n + j);
        SHARDFORMER_UNROLL
        for (int q = 0; q < Q; ++q) acc = at::vec::fmadd(xs[m][q], wv[q], acc);
        acc.store(y + m * n + j);
      }
    }
    for (; j < c1; ++j) {
      SHARDFORMER_UNROLL
      for (int m = 0; m < M; ++m) {
        float s = y[m * n + j];
        SHARDFORMER_UNROLL
        for (int q = 0; q < Q; ++q) s += x[m * k + i + q] * wi[q * n + j];
        y[m * n + j] = s;
      }
    }
  }
  for (; i < i1; ++i) {
    SHARDFORMER_UNROLL
    for (int m = 0; m < M; ++m) {
      for (int64_t j = c0; j < c1; ++j) y[m * n + j] += x[m * k + i] * w[i * n + j];
    }
  }
}

// Calls f(rows, first row) for x's rows in groups of up to 8 (each group reads a weight once),
// with rows as a compile-time count.
template <typename F>
void row_groups(int64_t m, const F& f) {
  for (int64_t row = 0; row < m;) {
    const int64_t rows = std::min<int64_t>(kRowGroup, m - row);
    switch (rows) {
      case 1: f(std::integral_constant<int, 1>{}, row); break;
      case 2: f(std::integral_constant<int, 2>{}, row); break;
      case 3: f(std::integral_constant<int, 3>{}, row); break;
      case 4: f(std::integral_constant<int, 4>{}, row); break;
      case 5: f(std::integral_constant<int, 5>{}, row); break;
      case 6: f(std::integral_constant<int, 6>{}, row); break;
      case 7: f(std::integral_constant<int, 7>{}, row); break;
      default: f(std::integral_constant<int, 8>{}, row); break;
    }
    row += rows;
  }
}

// Weight rows a thread takes at least: 128 KiB of weights, so that small matrices (a GQA
// model's k_proj of 192 rows) still use every thread.
int64_t row_grain(int64_t k) { return std::max<int64_t>(8, 32768 / std::max<int64_t>(k, 1)); }

// Bytes of fp32 weights in `count` matrices of rows x cols that a product's pass for the row
// group starting at x's row `row` reads from where the weights stay between steps: the first
// group's. Later groups find them in the caches the first filled, which would tell the prefetch
// choice nothing about the steps; they count as 0 bytes, never timed.
int64_t weight_bytes(int64_t row, int64_t rows, int64_t cols, int64_t count = 1) {
  return row == 0 ? count * rows * cols * static_cast<int64_t>(sizeof(float)) : 0;
}

template <int M, ReadWay W>
void skinny_rows(const float* x, int64_t k, const float* w, int64_t n, bool k_major,
                 const float* bias, float* y) {
  if (!k_major) {
    // Whole weight rows, one after another or in runs side by side (W); interleaving adjacent
    // rows measured 30-40% slower.
    at::parallel_for(0, n, row_grain(k), [&](int64_t begin, int64_t end) {
      const RowSpan span{w, n, bias, y, begin, end};
      read_spans<M, W>(x, k, &span, 1);
    });
    return;
  }
  // Each thread takes a contiguous block of weight rows (one sequential stream) into its own
  // partial output; splitting the columns instead measured no faster on 2 threads than on 1.
  const int64_t parts = std::clamp<int64_t>(k / 64, 1, at::get_num_threads());
  std::vector<float> partial(static_cast<size_t>((parts - 1) * M * n));
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = t == 0 ? y : partial.data() + (t - 1) * M * n;
      axpy_rows<M, W == ReadWay::kOn>(x, k, w, n, t * k / parts, (t + 1) * k / parts,
                                      t == 0 ? bias : nullptr, out);
    }
  });
  for (int64_t t = 1; t < parts; ++t) {
    const float* p = partial.data() + (t - 1) * M * n;
    at::vec::map2<float>([](Vec a, Vec b) { return a + b; }, y, y, p, M * n);
  }
}

void skinny_linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, bool k_major,
                   const float* bias, float* y) {
  if (!k_major && m > kRowGroup) {
    at::parallel_for(0, n, row_grain(k), [&](int64_t begin, int64_t end) {
      tiled_rows(x, m, k, w, n, begin, end, bias, y);
    });
    return;
  }
  row_groups(m, [&](auto rows, int64_t row) {
    constexpr int M = decltype(rows)::value;
    with_read_way(M, k_major, weight_bytes(row, n, k), [&](auto way) {
      skinny_rows<M, decltype(way)::value>(x + row * k, k, w, n, k_major, bias, y + row * n);
    });
  });
}

// Several nn.Linear products of one x in one parallel pass: the weights' rows are numbered one
// after the other and split over the threads, so each thread streams its block of rows (across
// a weight boundary at most once per weight) and the threads meet once, not once per weight.
void skinny_group(const float* x, int64_t m, int64_t k, int64_t count, const float* const* w,
                  const int64_t* n, const float* const* bias, float* const* y) {
  std::vector<int64_t> first(static_cast<size_t>(count) + 1, 0);  // first[i]: W_i's first row
  for (int64_t i = 0; i < count; ++i) first[i + 1] = first[i] + n[i];
  // Calls f(i, lo, hi) for the rows [lo, hi) of W_i within [begin, end) of all the rows.
  const auto each_weight = [&](int64_t begin, int64_t end, const auto& f) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t lo = std::max(begin, first[i]), hi = std::min(end, first[i + 1]);
      if (lo < hi) f(i, lo - first[i], hi - first[i]);
    }
  };
  if (m > kRowGroup) {
    at::parallel_for(0, first[count], row_grain(k), [&](int64_t begin, int64_t end) {
      each_weight(begin, end, [&](int64_t i, int64_t lo, int64_t hi) {
        tiled_rows(x, m, k, w[i], n[i], lo, hi, bias[i], y[i]);
      });
    });
    return;
  }
  row_groups(m, [&](auto rows, int64_t row) {
    constexpr int M = decltype(rows)::value;
    with_read_way(M, false, weight_bytes(row, first[count], k), [&](auto way) {
      at::parallel_for(0, first[count], row_grain(k), [&](int64_t begin, int64_t end) {
        c10::SmallVector<RowSpan, 4> spans;  // q / k / v: no allocation per product
        each_weight(begin, end, [&](int64_t i, int64_t lo, int64_t hi) {
          spans.push_back({w[i], n[i], bias[i], y[i] + row * n[i], lo, hi});
        });
        read_spans<M, decltype(way)::value>(x + row * k, k, spans.data(),
                                            static_cast<int>(spans.size()));
      });
    });
  });
}

// h = silu(x Wg^T + bg) * (x Wu^T + bu), weights [n, k]: each thread computes a block of gate
// rows into h, the same block of up rows into `up`, then gates its block, in one parallel pass.
// silu(g) = g / (1 + exp(-g)), ATen's formula.
void skinny_silu_gate(const float* x, int64_t m, int64_t k, const float* wg, const float* bg,
                      const float* wu, const float* bu, int64_t n, float* up, float* h) {
  // Gates rows [0, rows) of h = silu(h) * up over the columns [begin, end).
  const auto gate = [&](float* hr, const float* ur, int64_t rows, int64_t begin, int64_t end) {
    const Vec one(1.f);
    for (int64_t r = 0; r < rows; ++r) {
      float* g = hr + r * n;
      const float* u = ur + r * n;
      int64_t j = begin;
      for (; j + kLanes <= end; j += kLanes) {
        const Vec v = Vec::loadu(g + j);
        (v / (one + v.neg().exp()) * Vec::loadu(u + j)).store(g + j);
      }
      for (; j < end; ++j) g[j] = g[j] / (1.f + std::exp(-g[j])) * u[j];
    }
  };
  if (m > kRowGroup) {
    at::parallel_for(0, n, row_grain(k), [&](int64_t begin, int64_t end) {
      tiled_rows(x, m, k, wg, n, begin, end, bg, h);
      tiled_rows(x, m, k, wu, n, begin, end, bu, up);
      gate(h, up, m, begin, end);
    });
    return;
  }
  row_groups(m, [&](auto rows, int64_t row) {
    constexpr int M = decltype(rows)::value;
    const float* xr = x + row * k;
    float* hr = h + row * n;
    float* ur = up + row * n;
    with_read_way(M, false, weight_bytes(row, n, k, 2), [&](auto way) {
      at::parallel_for(0, n, row_grain(k), [&](int64_t begin, int64_t end) {
        const RowSpan spans[2] = {{wg, n, bg, hr, begin, end}, {wu, n, bu, ur, begin, end}};
        read_spans<M, decltype(way)::value>(xr, k, spans, 2);
        gate(hr, ur, M, begin, end);
      });
    });
  });
}

// 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), v = x + bias: ATen's tanh-GELU formula,
// computed as v / (1 + exp(-2 sqrt(2/pi) (v + 0.044715 v^3))) (0.5 (1 + tanh u) = sigmoid(2u)):
// one exp and a division instead of a tanh, and no cancellation where tanh is near -1.
void bias_gelu_tanh(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  const float beta2 = static_cast<float>(-M_SQRT2 * M_2_SQRTPI), kappa = 0.044715f;
  const auto scalar = [&](float v) {
    return v / (1.f + std::exp(beta2 * (v + kappa * v * v * v)));
  };
  const Vec vbeta2(beta2), vkappa(kappa), one(1.f);
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const float* xr = x + r * cols;
                       float* yr = y + r * cols;
                       int64_t i = 0;
                       for (; i + kLanes <= cols; i += kLanes) {
                         Vec v = Vec::loadu(xr + i);
                         if (bias != nullptr) v = v + Vec::loadu(bias + i);
                         const Vec e = (vbeta2 * (v + vkappa * v * v * v)).exp();
                         (v / (one + e)).store(yr + i);
                       }
                       for (; i < cols; ++i)
                         yr[i] = scalar(xr[i] + (bias != nullptr ? bias[i] : 0.f));
                     }
                   });
}

void sum_terms(const float* const* terms, int64_t n, const float* bias, float* out, int64_t rows,
               int64_t cols) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const int64_t row = r * cols;
                       int64_t i = 0;
                       for (; i + kLanes <= cols; i += kLanes) {
                         Vec v = Vec::loadu(terms[0] + row + i) + Vec::loadu(terms[1] + row + i);
                         for (int64_t t = 2; t < n; ++t) v = v + Vec::loadu(terms[t] + row + i);
                         if (bias != nullptr) v = v + Vec::loadu(bias + i);
                         v.store(out + row + i);
                       }
                       for (; i < cols; ++i) {
                         float v = terms[0][row + i] + terms[1][row + i];
                         for (int64_t t = 2; t < n; ++t) v += terms[t][row + i];
                         out[row + i] = bias != nullptr ? v + bias[i] : v;
                       }
                     }
                   });
}

// d/dx gelu_tanh = 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(beta (x +
// kappa x^3)): the input gradient in one pass (ATen's autograd of HF's formula makes about ten
// full-size temporaries). With s = 0.5 (1 + t) = 1 / (1 + exp(-2 beta (x + kappa x^3))), 1 - t^2
// = 4 s (1 - s): one exp and a division, as in the forward.
void gelu_tanh_backward(const float* x, const float* grad, float* dx, int64_t n) {
  const float beta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = 0.044715f;
  const auto scalar = [&](float v, float g) {
    const float s = 1.f / (1.f + std::exp(-2.f * beta * (v + kappa * v * v * v)));
    return g * (s + 2.f * v * s * (1.f - s) * beta * (1.f + 3.f * kappa * v * v));
  };
  const Vec vbeta(beta), vbeta2(-2.f * beta), vkappa(kappa), vkappa3(3.f * kappa), two(2.f),
      one(1.f);
  at::parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      const Vec v = Vec::loadu(x + i);
      const Vec v2 = v * v;
      const Vec s = one / (one + (vbeta2 * (v + vkappa * v2 * v)).exp());
      const Vec slope = s + two * v * s * (one - s) * vbeta * (one + vkappa3 * v2);
      (Vec::loadu(grad + i) * slope).store(dx + i);
    }
    for (; i < end; ++i) dx[i] = scalar(x[i], grad[i]);
  });
}

// The LayerNorm of one row s [cols] (just written, so in L1) whose elements add up to `total`:
// the variance in a second pass over the row, then the normalised, scaled row into y.
void normalize_row(const float* sr, float total, const float* weight, const float* bias, float* yr,
                   int64_t cols, float eps) {
  const float mean = total / static_cast<float>(cols);
  const Vec vmean(mean);
  Vec sq(0.f);
  int64_t i = 0;
  for (; i + kLanes <= cols; i += kLanes) {
    const Vec d = Vec::loadu(sr + i) - vmean;
    sq = at::vec::fmadd(d, d, sq);
  }
  float var = sum_lanes(sq);
  for (; i < cols; ++i) var += (sr[i] - mean) * (sr[i] - mean);
  const float rstd = 1.f / std::sqrt(var / static_cast<float>(cols) + eps);
  const Vec vrstd(rstd);
  for (i = 0; i + kLanes <= cols; i += kLanes) {
    Vec v = (Vec::loadu(sr + i) - vmean) * vrstd * Vec::loadu(weight + i);
    if (bias != nullptr) v = v + Vec::loadu(bias + i);
    v.store(yr + i);
  }
  for (; i < cols; ++i)
    yr[i] = (sr[i] - mean) * rstd * weight[i] + (bias != nullptr ? bias[i] : 0.f);
}

// The RMSNorm of one row x [cols] into y: weight * (x / sqrt(mean(x^2) + eps)).
void rms_normalize_row(const float* xr, const float* weight, float* yr, int64_t cols, float eps) {
  Vec sq(0.f);
  int64_t i = 0;
  for (; i + kLanes <= cols; i += kLanes) {
    const Vec v = Vec::loadu(xr + i);
    sq = at::vec::fmadd(v, v, sq);
  }
  float total = sum_lanes(sq);
  for (; i < cols; ++i) total += xr[i] * xr[i];
  const float rstd = 1.f / std::sqrt(total / static_cast<float>(cols) + eps);
  const Vec vrstd(rstd);
  for (i = 0; i + kLanes <= cols; i += kLanes) {
    (Vec::loadu(weight + i) * (Vec::loadu(xr + i) * vrstd)).store(yr + i);
  }
  for (; i < cols; ++i) yr[i] = weight[i] * (xr[i] * rstd);
}

// Per row: sum = x + residual (stored), then its LayerNorm (normalize_row).
void add_layer_norm(const float* x, const float* residual, const float* weight, const float* bias,
                    float* sum, float* y, int64_t rows, int64_t cols, float eps) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const float* xr = x + r * cols;
                       const float* rr = residual + r * cols;
                       float* sr = sum + r * cols;
                       Vec acc(0.f);
                       int64_t i = 0;
                       for (; i + kLanes <= cols; i += kLanes) {
                         const Vec s = Vec::loadu(xr + i) + Vec::loadu(rr + i);
                         s.store(sr + i);
                         acc = acc + s;
                       }
                       float total = sum_lanes(acc);
                       for (; i < cols; ++i) total += (sr[i] = xr[i] + rr[i]);
                       normalize_row(sr, total, weight, bias, y + r * cols, cols, eps);
                     }
                   });
}

// Per row: sum = residual + (((terms[0] + terms[1]) + ...) + bias) and, given a weight, its
// LayerNorm (or RMSNorm): a row-parallel layer's all-reduce, the residual add and the next norm
// in one pass (the same additions, in the same order, as sum_terms and then add_layer_norm or
// rms_norm).
void sum_add_norm(const float* const* terms, int64_t n, const float* bias, const float* residual,
                  bool rms, const float* weight, const float* norm_bias, float* sum, float* y,
                  int64_t rows, int64_t cols, float eps) {
  const auto term_sum = [&](int64_t at) {  // the terms and the bias at element `at`, vectorised
    Vec v =
        n >= 2 ? Vec::loadu(terms[0] + at) + Vec::loadu(terms[1] + at) : Vec::loadu(terms[0] + at);
    for (int64_t t = 2; t < n; ++t) v = v + Vec::loadu(terms[t] + at);
    return v;
  };
  at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const int64_t row = r * cols;
                       float* sr = sum + row;
                       Vec acc(0.f);
                       int64_t i = 0;
                       for (; i + kLanes <= cols; i += kLanes) {
                         Vec v = term_sum(row + i);
                         if (bias != nullptr) v = v + Vec::loadu(bias + i);
                         const Vec s = Vec::loadu(residual + row + i) + v;
                         s.store(sr + i);
                         acc = acc + s;
                       }
                       float total = sum_lanes(acc);
                       for (; i < cols; ++i) {
                         float v =
                             n >= 2 ? terms[0][row + i] + terms[1][row + i] : terms[0][row + i];
                         for (int64_t t = 2; t < n; ++t) v += terms[t][row + i];
                         if (bias != nullptr) v += bias[i];
                         total += (sr[i] = residual[row + i] + v);
                       }
                       if (weight != nullptr && rms) {
                         rms_normalize_row(sr, weight, y + row, cols, eps);
                       } else if (weight != nullptr) {
                         normalize_row(sr, total, weight, norm_bias, y + row, cols, eps);
                       }
                     }
                   });
}

// Per row: y = weight * x / sqrt(mean(x^2) + eps) (HF's Llama RMSNorm in fp32).
void rms_norm(const float* x, const float* weight, float* y, int64_t rows, int64_t cols,
              float eps) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       rms_normalize_row(x + r * cols, weight, y + r * cols, cols, eps);
                     }
                   });
}

// Per token and head: y1 = x1 cos1 - x2 sin1, y2 = x2 cos2 + x1 sin2 over the two halves of the
// rotary features (HF's rotate_half), then the features past rotary_dim copied.
void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t tokens,
            int64_t heads, int64_t head_dim, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  at::parallel_for(
      0, tokens, std::max<int64_t>(1, 4096 / std::max<int64_t>(heads * head_dim, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const float* c = cos + t * rotary_dim;
          const float* s = sin + t * rotary_dim;
          for (int64_t h = 0; h < heads; ++h) {
            const float* xr = x + (t * heads + h) * head_dim;
            float* yr = y + (t * heads + h) * head_dim;
            int64_t i = 0;
            for (; i + kLanes <= half; i += kLanes) {
              const Vec x1 = Vec::loadu(xr + i), x2 = Vec::loadu(xr + half + i);
              (x1 * Vec::loadu(c + i) - x2 * Vec::loadu(s + i)).store(yr + i);
              (x2 * Vec::loadu(c + half + i) + x1 * Vec::loadu(s + half + i)).store(yr + half + i);
            }
            for (; i < half; ++i) {
              const float x1 = xr[i], x2 = xr[half + i];
              yr[i] = x1 * c[i] - x2 * s[i];
              yr[half + i] = x2 * c[half + i] + x1 * s[half + i];
            }
            for (i = rotary_dim; i < head_dim; ++i) yr[i] = xr[i];
          }
        }
      });
}

// Per row: the max, then the sum of exp(x - max) (two passes; a row of the vocabulary stays in
// L2 between them). The sum is taken in blocks of 1024 with four vector accumulators, and the
// blocks' sums are added in double: one long fp32 chain over 50k terms drifts by 1e-5.
void softmax_stats(const float* x, int64_t rows, int64_t cols, float* max, float* sum) {
  constexpr int64_t kBlock = 1024;
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float m = -std::numeric_limits<float>::infinity();
      int64_t i = 0;
      if (cols >= kLanes) {
        Vec vm = Vec::loadu(xr);
        for (i = kLanes; i + kLanes <= cols; i += kLanes) {
          vm = at::vec::maximum(vm, Vec::loadu(xr + i));
        }
        m = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); },
                                           vm);
      }
      for (; i < cols; ++i) m = std::max(m, xr[i]);
      const Vec vmax(m);
      double total = 0.0;
      for (int64_t b = 0; b < cols; b += kBlock) {
        const int64_t e = std::min(cols, b + kBlock);
        Vec acc[4] = {Vec(0.f), Vec(0.f), Vec(0.f), Vec(0.f)};
        i = b;
        for (; i + 4 * kLanes <= e; i += 4 * kLanes) {
          SHARDFORMER_UNROLL
          for (int a = 0; a < 4; ++a) {
            acc[a] = acc[a] + (Vec::loadu(xr + i + a * kLanes) - vmax).exp();
          }
        }
        for (; i + kLanes <= e; i += kLanes) acc[0] = acc[0] + (Vec::loadu(xr + i) - vmax).exp();
        float block = sum_lanes((acc[0] + acc[1]) + (acc[2] + acc[3]));
        for (; i < e; ++i) block += std::exp(xr[i] - m);
        total += block;
      }
      max[r] = m;
      sum[r] = static_cast<float>(total);
    }
  });
}

void softmax_xent_grad(const float* x, const float* max, const float* sum, const int64_t* target,
                       const float* scale, float* grad, int64_t rows, int64_t cols) {
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float* gr = grad + r * cols;
      const float factor = scale[r] / sum[r];
      const Vec vmax(max[r]), vfactor(factor);
      int64_t i = 0;
      for (; i + kLanes <= cols; i += kLanes) {
        ((Vec::loadu(xr + i) - vmax).exp() * vfactor).store(gr + i);
      }
      for (; i < cols; ++i) gr[i] = std::exp(xr[i] - max[r]) * factor;
      if (target[r] >= 0) gr[target[r]] -= scale[r];
    }
  });
}

}  // namespace

const KernelTable table{
    &skinny_linear,  &bias_gelu_tanh,  &gelu_tanh_backward, &add_layer_norm, &rms_norm,
    &rotary,         &softmax_stats,   &softmax_xent_grad,  &sum_terms,      &sum_add_norm,
    &gemm_workspace, &block_attention, &cached_attention,   &gemm,           &packed_b_size,
    &pack_b_whole,   &skinny_group,    &skinny_silu_gate};

}  // namespace shardformer::kernels::CPU_CAPABILITY
