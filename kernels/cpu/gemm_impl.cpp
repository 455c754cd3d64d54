// A packed, cache-blocked fp32 GEMM (BLIS's five loops around a register-tile kernel), written
// with ATen's Vectorized<float> and compiled per instruction set like kernels_impl.cpp:
// C = A . B (+ bias) (+ C) for A and B of any strides. It serves block attention
// (attention_impl.cpp), whose blocks of scores stay in cache between its two products; the
// model's products run on a library (dispatch.cpp: why in docs/benchmarks.md).
#include "kernel_table.h"
#include "vec_common.h"

#include <algorithm>

namespace shardformer::kernels::CPU_CAPABILITY {
namespace {

// The register tile: kMr rows x kVecs vectors of C held in registers (AVX-512: 6 x 64 floats in
// 24 of the 32 zmm registers; AVX2: 6 x 16 in 12 of the 16 ymm registers).
constexpr int64_t kMr = 6;
constexpr int kVecs = kLanes >= 16 ? 4 : 2;
constexpr int64_t kNr = kVecs * kLanes;
// Cache blocks, tuned on a 2-core Zen 5 (48 KiB L1, 2 MiB L2, 32 MiB L3): a kKc-deep panel of
// B (kKc x kNc) and a block of A (kMc x kKc; packed only where its rows are strided) are swept
// by the tiles. A deep kKc keeps C's tiles in registers across most of k (768: 491 GFLOP/s
// against 432 at 384 on [2048, 768] x [768, 3072]).
constexpr int64_t kKc = 768;
constexpr int64_t kMc = 120;
constexpr int64_t kNc = 2048;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Lanes of vector v inside a tile nr columns wide (0 to kLanes).
int64_t lanes_of(int64_t nr, int v) { return std::clamp<int64_t>(nr - v * kLanes, 0, kLanes); }

Vec load_lanes(const float* p, int64_t lanes) {
  if (lanes == kLanes) return Vec::loadu(p);
  return lanes > 0 ? Vec::loadu(p, lanes) : Vec(0.f);
}

// One register tile: c [mr, nr] (=|+=) ap . bp (+ bias), with ap the packed [kc, kMr] micro-panel
// of A (zero-padded past mr) and bp a [kc, kNr] panel of B whose rows are ldb floats apart: packed
// (ldb = kNr, zero-padded past nr) or, for a full panel, B itself. The sum over
// p runs in chunks of kSum steps, each from zero in registers and then added to c, so rounding
// grows with the chunk plus the number of chunks, not with all of k. 192 is the chunk MKL's AVX2
// kernels use: on this project's machines the products equal ATen's bit for bit (the HF
// references too), and one chain of 768 steps ended 2-7x further from the fp64 product.
constexpr int64_t kSum = 192;
// AVX2's loop over p runs four steps an iteration: at one step its 12 multiply-adds shared the
// core with the loop's own instructions (2 threads on a Zen 3: 2-4% more GFLOP/s on GPT-2's
// products, two builds of bench/kernel_speed --gemm alternating). AVX-512's 24 a step are left
// as they were.
#if defined(CPU_CAPABILITY_AVX2)
#define SHARDFORMER_TILE_UNROLL _Pragma("GCC unroll 4")
#else
#define SHARDFORMER_TILE_UNROLL
#endif
// kPacked: ap is a packed micro-panel (element (i, p) at ap[p * kMr + i]); otherwise kMr rows of
// A itself, lda apart, each contiguous along p.
template <bool kPacked>
void tile(int64_t kc, const float* ap, int64_t lda, const float* bp, int64_t ldb, float* c,
          int64_t ldc, int64_t mr, int64_t nr, const float* bias, bool load_c) {
  for (int64_t p0 = 0; p0 < kc; p0 += kSum) {
    Vec acc[kMr][kVecs];
    SHARDFORMER_UNROLL
    for (int64_t i = 0; i < kMr; ++i) {
      SHARDFORMER_UNROLL
      for (int v = 0; v < kVecs; ++v) acc[i][v] = Vec(0.f);
    }
    const int64_t p1 = std::min(kc, p0 + kSum);
    SHARDFORMER_TILE_UNROLL
    for (int64_t p = p0; p < p1; ++p) {
      Vec b[kVecs];
      SHARDFORMER_UNROLL
      for (int v = 0; v < kVecs; ++v) b[v] = Vec::loadu(bp + p * ldb + v * kLanes);
      SHARDFORMER_UNROLL
      for (int64_t i = 0; i < kMr; ++i) {
        const Vec a(kPacked ? ap[p * kMr + i] : ap[i * lda + p]);
        SHARDFORMER_UNROLL
        for (int v = 0; v < kVecs; ++v) acc[i][v] = at::vec::fmadd(a, b[v], acc[i][v]);
      }
    }
    const bool fresh = p0 == 0 && !load_c;  // c holds nothing of this product yet
    SHARDFORMER_UNROLL
    for (int64_t i = 0; i < kMr; ++i) {
      if (i >= mr) break;
      SHARDFORMER_UNROLL
      for (int v = 0; v < kVecs; ++v) {
        const int64_t lanes = lanes_of(nr, v);
        if (lanes == 0) continue;
        float* cv = c + i * ldc + v * kLanes;
        Vec base = fresh ? Vec(0.f) : load_lanes(cv, lanes);
        if (p0 == 0 && bias != nullptr) base = base + load_lanes(bias + v * kLanes, lanes);
        (base + acc[i][v]).store(cv, lanes);
      }
    }
  }
}

// B [kc, nc] (element (p, j) at b[p * brs + j * bcs]) into micro-panels of kNr columns, each
// [kc, kNr] row-major and zero-padded: the layout `tile` reads.
void pack_b(const float* b, int64_t brs, int64_t bcs, int64_t kc, int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const int64_t nr = std::min(kNr, nc - jr);
    float* d = dst + jr * kc;
    const float* s = b + jr * bcs;
    if (bcs == 1 && nr == kNr) {  // rows of B contiguous (HF's Conv1D weight [k, n])
      for (int64_t p = 0; p < kc; ++p) {
        SHARDFORMER_UNROLL
        for (int v = 0; v < kVecs; ++v) {
          Vec::loadu(s + p * brs + v * kLanes).store(d + p * kNr + v * kLanes);
        }
      }
    } else if (brs == 1 && nr == kNr) {
      // Columns of B contiguous (nn.Linear's weight [n, k] read as W^T): 16 x 16 blocks
      // transposed in registers, each reading 16 columns 64 bytes at a time. A gather of one
      // float per column ran at 3-8 GB/s and was 40% of a 197-row product's time at k = 3072.
      constexpr int64_t kBlock = 16;
      static_assert(kNr % kBlock == 0);
      const int64_t whole = kc / kBlock * kBlock;
      for (int64_t j = 0; j < kNr; j += kBlock) {
        for (int64_t p = 0; p < whole; p += kBlock) {
          at::vec::transpose_mxn<float, kBlock, kBlock>(s + j * bcs + p, bcs, d + p * kNr + j, kNr);
        }
      }
      for (int64_t p = whole; p < kc; ++p) {
        for (int64_t j = 0; j < kNr; ++j) d[p * kNr + j] = s[p + j * bcs];
      }
    } else {
      for (int64_t j = 0; j < kNr; ++j) {
        for (int64_t p = 0; p < kc; ++p) d[p * kNr + j] = j < nr ? s[p * brs + j * bcs] : 0.f;
      }
    }
  }
}

// A [mc, kc] (element (i, p) at a[i * ars + p * acs]) into micro-panels of kMr rows, each
// [kc, kMr] row-major and zero-padded.
void pack_a(const float* a, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t mr = std::min(kMr, mc - ir);
    float* d = dst + ir * kc;
    const float* s = a + ir * ars;
    if (ars == 1 && mr == kMr) {  // columns of A contiguous (a transposed gradient or input)
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t i = 0; i < kMr; ++i) d[p * kMr + i] = s[p * acs + i];
      }
      continue;
    }
    for (int64_t i = 0; i < kMr; ++i) {
      if (i < mr) {
        const float* row = s + i * ars;
        for (int64_t p = 0; p < kc; ++p) d[p * kMr + i] = row[p * acs];
      } else {
        for (int64_t p = 0; p < kc; ++p) d[p * kMr + i] = 0.f;
      }
    }
  }
}

// Whether a part of m rows reads B's full panels where they are instead of packing them: rows of
// B contiguous, and too few rows of A to repay a copy of B (each panel serves at most kMc / kMr
// tiles). A prefill's products at a few dozen tokens copy none of the weights then.
bool b_in_place(int64_t m, int64_t bcs) { return bcs == 1 && m <= kMc; }

// Whether full micro-panels of A are read where they are instead of packed: rows of A contiguous
// (every forward product). Each row is then one sequential stream the tile broadcasts from, as
// cache-friendly as the packed copy, and the copy's pass over A is saved (3-15% of a product's
// time on [2048, k] inputs: most where k is deep, as in the MLP's second product).
bool a_in_place(int64_t acs) { return acs == 1; }

// Floats of packing space one part of m x n x k needs.
int64_t part_workspace(int64_t m, int64_t n, int64_t k, int64_t bcs) {
  const int64_t kc = std::min(kKc, k);
  const int64_t b_panels = b_in_place(m, bcs) ? kNr : std::min(kNc, round_up(n, kNr));
  return std::min(kMc, round_up(m, kMr)) * kc + kc * b_panels;
}

// How a product is cut into parts, one per thread: along m when m >= n (each part packs all of B)
// and along n otherwise (each part packs all of A), in whole tiles.
struct Split {
  int64_t parts, step;
  bool along_m;
};

Split split_of(int64_t m, int64_t n, int64_t k, int64_t threads, bool rows_only = false) {
  const bool along_m = rows_only || m >= n;
  const int64_t unit = along_m ? kMr : kNr, extent = along_m ? m : n;
  // At least one tile of rows or columns and about 2^20 multiply-adds per part.
  const int64_t by_work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1) >> 20);
  const int64_t parts =
      std::clamp<int64_t>(std::min(by_work, (extent + unit - 1) / unit), 1, threads);
  const int64_t step = round_up((extent + parts - 1) / parts, unit);
  return {(extent + step - 1) / step, step, along_m};
}

// Where block (jc, pc) of B (columns jc .. jc + nc, depths pc .. pc + kc) lies in B packed
// whole (pack_b_whole): blocks of columns one after the other, each k deep, its depths one
// after the other, each as pack_b lays it out over nc rounded up to whole panels.
int64_t packed_offset(int64_t k, int64_t jc, int64_t pc, int64_t nc) {
  return jc * k + pc * round_up(nc, kNr);
}

// One part of the product. packed: B packed whole (pack_b_whole), read instead of B; null to
// pack each block of B here (or read B's full panels where they are).
void gemm_part(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
               const float* b, int64_t brs, int64_t bcs, const float* bias, bool accumulate,
               float* c, int64_t ldc, float* work, const float* packed = nullptr) {
  if (k == 0) {  // an empty sum: C keeps its values or becomes the bias
    for (int64_t i = 0; i < m && !accumulate; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = bias != nullptr ? bias[j] : 0.f;
    }
    return;
  }
  float* abuf = work;
  float* bbuf = work + std::min(kMc, round_up(m, kMr)) * std::min(kKc, k);
  const bool in_place = packed == nullptr && b_in_place(m, bcs);
  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKc) {
      const int64_t kc = std::min(kKc, k - pc);
      const float* b_block = packed == nullptr ? b + pc * brs + jc * bcs : nullptr;
      // This block's packed panels: B packed whole, or packed here.
      const float* panels = packed != nullptr ? packed + packed_offset(k, jc, pc, nc) : bbuf;
      if (packed == nullptr && !in_place) pack_b(b_block, brs, bcs, kc, nc, bbuf);
      const bool load_c = accumulate || pc > 0;
      const float* tile_bias = pc == 0 && bias != nullptr ? bias + jc : nullptr;
      for (int64_t ic = 0; ic < m; ic += kMc) {
        const int64_t mc = std::min(kMc, m - ic);
        const float* a_block = a + ic * ars + pc * acs;
        // Rows of A contiguous: full micro-panels are read where they are; only a last, partial
        // one is packed (with its zero padding).
        const int64_t direct = a_in_place(acs) ? mc / kMr * kMr : 0;
        if (direct < mc) {
          pack_a(a_block + direct * ars, ars, acs, mc - direct, kc, abuf + direct * kc);
        }
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t nr = std::min(kNr, nc - jr);
          const float* bp = panels + jr * kc;
          int64_t ldb = kNr;
          if (in_place && nr == kNr) {
            bp = b_block + jr, ldb = brs;
          } else if (in_place) {  // the last, partial panel: packed with its zero padding
            pack_b(b_block + jr, brs, bcs, kc, nr, bbuf);
            bp = bbuf;
          }
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            float* ct = c + (ic + ir) * ldc + jc + jr;
            const float* bt = tile_bias != nullptr ? tile_bias + jr : nullptr;
            if (ir < direct) {
              tile<false>(kc, a_block + ir * ars, ars, bp, ldb, ct, ldc, kMr, nr, bt, load_c);
            } else {
              tile<true>(kc, abuf + ir * kc, 0, bp, ldb, ct, ldc, std::min(kMr, mc - ir), nr, bt,
                         load_c);
            }
          }
        }
      }
    }
  }
}

}  // namespace

int64_t gemm_workspace(int64_t m, int64_t n, int64_t k, int64_t bcs, int64_t threads, bool packed) {
  const Split s = split_of(m, n, k, threads, packed);
  return s.parts *
         (s.along_m ? part_workspace(s.step, n, k, bcs) : part_workspace(m, s.step, k, bcs));
}

int64_t packed_b_size(int64_t k, int64_t n) { return k * round_up(n, kNr); }

void pack_b_whole(int64_t k, int64_t n, const float* b, int64_t brs, int64_t bcs, float* packed) {
  // Each block's panels split over ATen's threads: a panel is packed alone, where pack_b puts it.
  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKc) {
      const int64_t kc = std::min(kKc, k - pc);
      float* block = packed + packed_offset(k, jc, pc, nc);
      at::parallel_for(0, (nc + kNr - 1) / kNr, 1, [&](int64_t first, int64_t last) {
        const int64_t j0 = first * kNr, j1 = std::min(nc, last * kNr);
        pack_b(b + pc * brs + (jc + j0) * bcs, brs, bcs, kc, j1 - j0, block + j0 * kc);
      });
    }
  }
}

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
          int64_t brs, int64_t bcs, const float* bias, bool accumulate, float* c, int64_t ldc,
          int64_t threads, float* workspace, const float* packed) {
  // B packed whole is laid out by whole blocks of columns: its parts split the rows only.
  const Split s = split_of(m, n, k, threads, packed != nullptr);
  const int64_t per_part =
      s.along_m ? part_workspace(s.step, n, k, bcs) : part_workspace(m, s.step, k, bcs);
  at::parallel_for(0, s.parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t lo = t * s.step;
      float* work = workspace + t * per_part;
      if (s.along_m) {
        gemm_part(std::min(s.step, m - lo), n, k, a + lo * ars, ars, acs, b, brs, bcs, bias,
                  accumulate, c + lo * ldc, ldc, work, packed);
      } else {
        gemm_part(m, std::min(s.step, n - lo), k, a, ars, acs, b + lo * bcs, brs, bcs,
                  bias != nullptr ? bias + lo : nullptr, accumulate, c + lo, ldc, work);
      }
    }
  });
}

}  // namespace shardformer::kernels::CPU_CAPABILITY
