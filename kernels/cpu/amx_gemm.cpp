// AMX products in bf16x6 (amx_gemm.h): the split of fp32 operands into three bf16 parts, the
// weights' tile layout, and a 32 x 32 kernel that runs the six part products on two A and two B
// tiles into four C tiles. Only the functions marked kAmxCode hold AMX or AVX-512 code.
#include "shardformer/kernels/amx_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SHARDFORMER_AMX_CODE \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace shardformer::kernels {
namespace {

constexpr int64_t kTileRows = 16;  // rows of every tile, and the fp32 columns of a C tile
constexpr int64_t kStepK = 32;     // k values in a bf16 tile row (64 bytes)
constexpr int64_t kBlock = 32;     // a kernel's rows and columns: 2 x 2 C tiles
constexpr int kParts = 3;
// One (block of 32 columns, step of 32 k) of a packed weight: 3 parts x 2 column tiles, each
// [16 k pairs][16 columns][2] as TDPBF16PS reads B.
constexpr int64_t kTileElements = kTileRows * kStepK;  // 512 bf16, 1 KiB
constexpr int64_t kPackedStep = kParts * 2 * kTileElements;
// A task's columns and a pass's k: the task's weight slab (256 columns x 768 k x 3 parts, 1.2
// MB) stays in the core's L2 while the task's rows pass over it, 32 at a time. One pass covers
// GPT-2's k of 768, so its LM head's 412 MB of logits are written once, not read back between
// passes.
constexpr int64_t kTaskColumns = 256;
constexpr int64_t kPassSteps = 768 / kStepK;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

#if defined(__x86_64__)

bool cpu_has_amx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tile = (d & (1U << 24)) != 0, bf16 = (d & (1U << 22)) != 0;
  const bool avx512 = (b & (1U << 16)) != 0 && (b & (1U << 30)) != 0 && (b & (1U << 31)) != 0;
  if (!tile || !bf16 || !avx512 || a < 1) return false;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
  return (a & (1U << 5)) != 0;  // AVX512-BF16
}

// Linux hands a process the tiles' 8 KiB of state only when asked (since 5.16).
bool os_grants_tiles() {
  constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
  return ::syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

bool hardware_serves() {
  static const bool serves = cpu_has_amx() && os_grants_tiles();
  return serves;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  std::array<uint8_t, 14> reserved{};
  std::array<uint16_t, 16> bytes_per_row{};
  std::array<uint8_t, 16> rows{};
};

// Every tile 16 rows of 64 bytes: C 0-3 ([16, 16] fp32), A 4-5 ([16, 32] bf16), B 6-7.
SHARDFORMER_AMX_CODE void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = kTileRows;
  }
  // GCC 12 drops the stores above as dead without this: it takes LDTILECFG to read only the
  // first byte.
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

// The three bf16 parts of x[0 : count] (count <= 16; lanes past it zero), rounded to nearest
// even in turn: part 0 = bf16(x), part 1 = bf16(x - part 0), part 2 = bf16(the rest).
SHARDFORMER_AMX_CODE void split16(const float* x, int64_t count, uint16_t* part0,
                                  int64_t part_stride) {
  const auto mask =
      static_cast<__mmask16>(count >= 16 ? 0xffff : (1U << std::max<int64_t>(count, 0)) - 1);
  __m512 rest = _mm512_maskz_loadu_ps(mask, x);
  for (int p = 0; p < kParts; ++p) {
    const __m256i part = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(rest));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(part0 + p * part_stride), part);
    const __m512 value = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(part), 16));
    rest = _mm512_sub_ps(rest, value);
  }
}

// Row block rb of x ([m, k], rows x_row apart) split as the tiles read it: per step of 32 k, the
// three parts' [32 rows][32 k] one after another (kPackedStep values a step, as a packed weight's
// column block), so that every tile load reads 1 KiB in a row; zeros past k and past m.
SHARDFORMER_AMX_CODE void split_row_block(const float* x, int64_t x_row, int64_t m, int64_t k,
                                          int64_t rb, int64_t k_steps, uint16_t* parts) {
  uint16_t* block = parts + rb * k_steps * kPackedStep;
  for (int64_t i = 0; i < kBlock; ++i) {
    const int64_t r = rb * kBlock + i;
    for (int64_t j = 0; j < k_steps * kStepK; j += 16) {
      uint16_t* to = block + (j / kStepK) * kPackedStep + i * kStepK + j % kStepK;
      if (r < m) {
        split16(x + r * x_row + j, k - j, to, 2 * kTileElements);
      } else {
        for (int p = 0; p < kParts; ++p) std::memset(to + p * 2 * kTileElements, 0, 16 * 2);
      }
    }
  }
}

// Where a kernel's four C tiles ([16, 16] fp32 each: rows r, columns h as tile 2r + h) are read
// and written: in the output where the whole tile lies inside it, else in a staging tile whose
// part inside the output is copied in (when accumulating) and out.
struct CTiles {
  std::array<float*, 4> tile{};
  std::array<int64_t, 4> stride_bytes{};
  std::array<int64_t, 4> rows{}, columns{};
  std::array<float*, 4> target{};  // the output where staged, else null
  int64_t target_stride = 0;
  alignas(64) std::array<std::array<float, kTileRows * kTileRows>, 4> staging{};

  // The block at out [row0, col0] of an m x n output with rows `out_stride` floats apart.
  void place(float* out, int64_t out_stride, int64_t m, int64_t n, int64_t row0, int64_t col0) {
    target_stride = out_stride;
    for (int t = 0; t < 4; ++t) {
      const int64_t r = row0 + (t / 2) * kTileRows, c = col0 + (t % 2) * kTileRows;
      rows[t] = std::clamp<int64_t>(m - r, 0, kTileRows);
      columns[t] = std::clamp<int64_t>(n - c, 0, kTileRows);
      if (rows[t] == kTileRows && columns[t] == kTileRows) {
        tile[t] = out + r * out_stride + c;
        stride_bytes[t] = out_stride * 4;
        target[t] = nullptr;
      } else {
        tile[t] = staging[t].data();
        stride_bytes[t] = kTileRows * 4;
        target[t] = rows[t] > 0 && columns[t] > 0 ? out + r * out_stride + c : nullptr;
      }
    }
  }

  void stage_in() {
    for (int t = 0; t < 4; ++t) {
      if (tile[t] != staging[t].data()) continue;
      staging[t].fill(0.F);
      if (target[t] == nullptr) continue;  // wholly outside the output
      for (int64_t i = 0; i < rows[t]; ++i) {
        std::copy_n(target[t] + i * target_stride, columns[t], staging[t].data() + i * kTileRows);
      }
    }
  }

  void stage_out() {
    for (int t = 0; t < 4; ++t) {
      if (target[t] == nullptr) continue;
      for (int64_t i = 0; i < rows[t]; ++i) {
        std::copy_n(staging[t].data() + i * kTileRows, columns[t], target[t] + i * target_stride);
      }
    }
  }
};

SHARDFORMER_AMX_CODE inline void multiply_four() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

enum class Start { kZero, kBias, kOutput };

// C [32, 32] (=|+=) the six part products over `steps` steps of 32 k: a the split steps of its row
// block (split_row_block), b the packed steps of its column block; bias [32]
// the block's columns (Start::kBias: every row starts from it, a tile loaded with row stride 0).
SHARDFORMER_AMX_CODE void kernel(const uint16_t* a, const uint16_t* b, int64_t steps,
                                 const float* bias, Start start, const CTiles& c) {
  if (start == Start::kOutput) {
    _tile_loadd(0, c.tile[0], c.stride_bytes[0]);
    _tile_loadd(1, c.tile[1], c.stride_bytes[1]);
    _tile_loadd(2, c.tile[2], c.stride_bytes[2]);
    _tile_loadd(3, c.tile[3], c.stride_bytes[3]);
  } else if (start == Start::kBias) {
    _tile_loadd(0, bias, 0);
    _tile_loadd(1, bias + kTileRows, 0);
    _tile_loadd(2, bias, 0);
    _tile_loadd(3, bias + kTileRows, 0);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  // Within a step, a part's two tiles (A: rows 0-15, 16-31; B: columns) 1 KiB apart, parts 2 KiB.
  const int64_t half = kTileElements, part = 2 * kTileElements;
  for (int64_t s = 0; s < steps; ++s) {
    const uint16_t* as = a + s * kPackedStep;
    const uint16_t* bs = b + s * kPackedStep;
    // The six products in an order where each loads one operand's two tiles: A0 B0, A0 B2,
    // A0 B1, A1 B1, A1 B0, A2 B0.
    _tile_loadd(4, as, 64);
    _tile_loadd(5, as + half, 64);
    _tile_loadd(6, bs, 64);
    _tile_loadd(7, bs + half, 64);
    multiply_four();
    _tile_loadd(6, bs + 2 * part, 64);
    _tile_loadd(7, bs + 2 * part + half, 64);
    multiply_four();
    _tile_loadd(6, bs + part, 64);
    _tile_loadd(7, bs + part + half, 64);
    multiply_four();
    _tile_loadd(4, as + part, 64);
    _tile_loadd(5, as + part + half, 64);
    multiply_four();
    _tile_loadd(6, bs, 64);
    _tile_loadd(7, bs + half, 64);
    multiply_four();
    _tile_loadd(4, as + 2 * part, 64);
    _tile_loadd(5, as + 2 * part + half, 64);
    multiply_four();
  }
  _tile_stored(0, c.tile[0], c.stride_bytes[0]);
  _tile_stored(1, c.tile[1], c.stride_bytes[1]);
  _tile_stored(2, c.tile[2], c.stride_bytes[2]);
  _tile_stored(3, c.tile[3], c.stride_bytes[3]);
}

SHARDFORMER_AMX_CODE void release_tiles() { _tile_release(); }

// The products' shape and operands for the tasks.
struct Product {
  int64_t m, n, k_steps, row_blocks, column_blocks;
  const uint16_t* parts;  // [row_blocks][k_steps][kPackedStep]: split_row_block's
  const uint16_t* packed;
  const float* bias;  // [column_blocks * 32], or null
  bool accumulate;    // the first pass adds to out (bias then null)
  float* out;
  int64_t out_stride;
};

// One task: column blocks [cb0, cb1) over row blocks [rb0, rb1), in passes of kPassSteps.
void run_task(const Product& p, int64_t rb0, int64_t rb1, int64_t cb0, int64_t cb1, CTiles& c) {
  for (int64_t s0 = 0; s0 < p.k_steps; s0 += kPassSteps) {
    const int64_t steps = std::min(kPassSteps, p.k_steps - s0);
    const Start start = s0 > 0 || p.accumulate ? Start::kOutput
                        : p.bias != nullptr    ? Start::kBias
                                               : Start::kZero;
    for (int64_t rb = rb0; rb < rb1; ++rb) {
      const uint16_t* a = p.parts + (rb * p.k_steps + s0) * kPackedStep;
      for (int64_t cb = cb0; cb < cb1; ++cb) {
        c.place(p.out, p.out_stride, p.m, p.n, rb * kBlock, cb * kBlock);
        if (start == Start::kOutput) c.stage_in();
        kernel(a, p.packed + (cb * p.k_steps + s0) * kPackedStep, steps,
               p.bias != nullptr ? p.bias + cb * kBlock : nullptr, start, c);
        c.stage_out();
      }
    }
  }
}

// Part p of B's tile for column tile ct (16 columns) at step kb: [16 k pairs][16 columns][2].
uint16_t* b_tile(uint16_t* packed, int64_t k_steps, int64_t ct, int64_t kb, int p) {
  return packed + ((ct / 2) * k_steps + kb) * kPackedStep + p * 2 * kTileElements +
         (ct % 2) * kTileElements;
}

// The fp32 values of 16 bf16.
SHARDFORMER_AMX_CODE __m512 widen(__m256i bf16) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}

SHARDFORMER_AMX_CODE __m512 load_up_to(const float* x, int64_t count) {
  return _mm512_maskz_loadu_ps(
      static_cast<__mmask16>(count >= 16 ? 0xffff : (1U << std::max<int64_t>(count, 0)) - 1), x);
}

// Column tile ct of B stored as rows of B^T ([n, k], nn.Linear's weight, rows row_stride apart):
// each row's 32 values of a step split, a part's 32 bf16 read as 16 pairs (k even, odd) and
// scattered to the pairs' slots of the row's column, 64 bytes apart.
SHARDFORMER_AMX_CODE void pack_transposed_tile(const float* w, int64_t n, int64_t k,
                                               int64_t row_stride, int64_t k_steps, int64_t ct,
                                               uint16_t* packed) {
  const __m512i slots =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(16));
  for (int64_t kb = 0; kb < k_steps; ++kb) {
    for (int64_t i = 0; i < kTileRows && ct * kTileRows + i < n; ++i) {
      const float* x = w + (ct * kTileRows + i) * row_stride + kb * kStepK;
      const int64_t count = k - kb * kStepK;
      __m512 low = load_up_to(x, count), high = load_up_to(x + 16, count - 16);
      for (int p = 0; p < kParts; ++p) {
        const auto part = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
        _mm512_i32scatter_epi32(reinterpret_cast<int*>(b_tile(packed, k_steps, ct, kb, p)) + i,
                                slots, part, 4);
        low = _mm512_sub_ps(low, widen(_mm512_castsi512_si256(part)));
        high = _mm512_sub_ps(high, widen(_mm512_extracti64x4_epi64(part, 1)));
      }
    }
  }
}

// Column tile ct of B stored as its rows ([k, n], HF's Conv1D weight, rows row_stride apart):
// rows 2q and 2q + 1 of a step split 16 columns at a time and interleaved, 64 bytes a pair.
SHARDFORMER_AMX_CODE void pack_rows_tile(const float* w, int64_t n, int64_t k, int64_t row_stride,
                                         int64_t k_steps, int64_t ct, uint16_t* packed) {
  const int64_t columns = n - ct * kTileRows;
  for (int64_t kk = 0; kk < k; kk += 2) {
    const float* even = w + kk * row_stride + ct * kTileRows;
    __m512 a = load_up_to(even, columns);
    __m512 b = kk + 1 < k ? load_up_to(even + row_stride, columns) : _mm512_setzero_ps();
    for (int p = 0; p < kParts; ++p) {
      const auto a16 = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(a));
      const auto b16 = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(b));
      const __m512i pairs = _mm512_or_si512(_mm512_cvtepu16_epi32(a16),
                                            _mm512_slli_epi32(_mm512_cvtepu16_epi32(b16), 16));
      uint16_t* tile = b_tile(packed, k_steps, ct, kk / kStepK, p);
      _mm512_storeu_si512(tile + ((kk % kStepK) / 2) * kStepK, pairs);
      a = _mm512_sub_ps(a, widen(a16));
      b = _mm512_sub_ps(b, widen(b16));
    }
  }
}

// The stored matrix w (rows of `length` values, row_stride apart) as B of the product, packed:
// k_major, w is B [k, n]; else B^T [n, k] (nn.Linear's weight). packed: amx_packed_elements(n, k)
// zeros. Threads take column tiles.
void pack(const float* w, int64_t rows, int64_t length, int64_t row_stride, bool k_major,
          uint16_t* packed) {
  const int64_t k = k_major ? rows : length, n = k_major ? length : rows;
  const int64_t k_steps = round_up(k, kStepK) / kStepK;
  at::parallel_for(0, (n + kTileRows - 1) / kTileRows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ct = begin; ct < end; ++ct) {
      if (k_major) {
        pack_rows_tile(w, n, k, row_stride, k_steps, ct, packed);
      } else {
        pack_transposed_tile(w, n, k, row_stride, k_steps, ct, packed);
      }
    }
  });
}

// out [m, n] (rows out_stride apart) (=|+=) x [m, k] (rows x_row apart) . B (+ bias [n], or
// null) for B packed by pack(); k > 0.
void multiply(const float* x, int64_t x_row, int64_t m, int64_t k, const uint16_t* packed,
              int64_t n, const float* bias, bool accumulate, float* out, int64_t out_stride) {
  const int64_t k_steps = round_up(k, kStepK) / kStepK, row_blocks = round_up(m, kBlock) / kBlock;
  const int64_t column_blocks = round_up(n, kBlock) / kBlock;
  at::Tensor parts = at::empty({row_blocks * k_steps * kPackedStep}, at::kBFloat16);
  auto* parts_data = reinterpret_cast<uint16_t*>(parts.data_ptr());
  at::parallel_for(0, row_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t rb = begin; rb < end; ++rb) {
      split_row_block(x, x_row, m, k, rb, k_steps, parts_data);
    }
  });
  // The kernel reads 32 bias values a column block: zeros past n.
  std::vector<float> bias_padded;
  if (bias != nullptr && !accumulate) {
    bias_padded.assign(static_cast<size_t>(column_blocks * kBlock), 0.F);
    std::copy_n(bias, n, bias_padded.begin());
  }
  const Product product{.m = m,
                        .n = n,
                        .k_steps = k_steps,
                        .row_blocks = row_blocks,
                        .column_blocks = column_blocks,
                        .parts = parts_data,
                        .packed = packed,
                        .bias = bias_padded.empty() ? nullptr : bias_padded.data(),
                        .accumulate = accumulate,
                        .out = out,
                        .out_stride = out_stride};
  // Tasks: column slabs of kTaskColumns, each over a share of the rows; at least 8 per thread
  // where the rows allow, so that the threads finish together.
  const int64_t slab_blocks = kTaskColumns / kBlock;
  const int64_t slabs = (column_blocks + slab_blocks - 1) / slab_blocks;
  const int64_t threads = at::get_num_threads();
  const int64_t shares = std::clamp<int64_t>((8 * threads + slabs - 1) / slabs, 1, row_blocks);
  at::parallel_for(0, slabs * shares, 1, [&](int64_t begin, int64_t end) {
    configure_tiles();
    CTiles c;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slab = t / shares, share = t % shares;
      const int64_t cb0 = slab * slab_blocks, cb1 = std::min(column_blocks, cb0 + slab_blocks);
      const int64_t rb0 = row_blocks * share / shares, rb1 = row_blocks * (share + 1) / shares;
      run_task(product, rb0, rb1, cb0, cb1, c);
    }
    release_tiles();
  });
}

#endif  // __x86_64__

bool cpu_float(const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; }

}  // namespace

bool amx_available() {
#if defined(__x86_64__)
  return hardware_serves();
#else
  return false;
#endif
}

int64_t amx_packed_elements(int64_t n, int64_t k) {
  return round_up(n, kBlock) / kBlock * (round_up(k, kStepK) / kStepK) * kPackedStep;
}

#if defined(__x86_64__)

at::Tensor amx_pack_weight(const at::Tensor& weight, bool k_major) {
  TORCH_CHECK(amx_available(), "amx_pack_weight: this CPU or OS offers no AMX-BF16 tiles");
  TORCH_CHECK(cpu_float(weight) && weight.dim() == 2 && weight.is_contiguous(),
              "amx_pack_weight: weight ", weight.sizes(), " must be a contiguous fp32 CPU matrix");
  const int64_t n = weight.size(k_major ? 1 : 0), k = weight.size(k_major ? 0 : 1);
  at::Tensor packed = at::zeros({amx_packed_elements(n, k)}, at::kBFloat16);
  pack(weight.const_data_ptr<float>(), weight.size(0), weight.size(1), weight.size(1), k_major,
       reinterpret_cast<uint16_t*>(packed.data_ptr()));
  return packed;
}

at::Tensor amx_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n,
                      const at::Tensor& bias) {
  TORCH_CHECK(amx_available(), "amx_linear: this CPU or OS offers no AMX-BF16 tiles");
  TORCH_CHECK(cpu_float(x) && x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "amx_linear: x ", x.sizes(), " must be an fp32 CPU matrix with contiguous rows");
  const int64_t m = x.size(0), k = x.size(1);
  TORCH_CHECK(packed.scalar_type() == at::kBFloat16 && packed.is_contiguous() &&
                  packed.numel() == amx_packed_elements(n, k),
              "amx_linear: packed weight of ", packed.numel(), " values is not one of [", n, ", ",
              k, "] packed by amx_pack_weight");
  TORCH_CHECK(!bias.defined() || (cpu_float(bias) && bias.is_contiguous() && bias.numel() == n),
              "amx_linear: bias must be a contiguous fp32 CPU vector of ", n, " values");
  at::Tensor out = at::empty({m, n}, x.options());
  if (m == 0 || n == 0) return out;
  if (k == 0) return bias.defined() ? out.copy_(bias.expand({m, n})) : out.zero_();
  multiply(x.const_data_ptr<float>(), x.stride(0), m, k,
           reinterpret_cast<const uint16_t*>(packed.const_data_ptr()), n,
           bias.defined() ? bias.const_data_ptr<float>() : nullptr, false,
           out.mutable_data_ptr<float>(), n);
  return out;
}

void amx_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, bool accumulate,
              const at::Tensor& out) {
  TORCH_CHECK(amx_available(), "amx_gemm: this CPU or OS offers no AMX-BF16 tiles");
  TORCH_CHECK(cpu_float(a) && cpu_float(b) && cpu_float(out) && a.dim() == 2 && b.dim() == 2 &&
                  out.dim() == 2 && a.size(1) == b.size(0) && out.size(0) == a.size(0) &&
                  out.size(1) == b.size(1) && (out.size(1) <= 1 || out.stride(1) == 1),
              "amx_gemm: a ", a.sizes(), " . b ", b.sizes(), " into out ", out.sizes(),
              " must be fp32 CPU matrices [m, k] . [k, n] -> [m, n], out's rows contiguous");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  TORCH_CHECK(!bias.defined() || (cpu_float(bias) && bias.is_contiguous() && bias.numel() == n),
              "amx_gemm: bias must be a contiguous fp32 CPU vector of ", n, " values");
  if (m == 0 || n == 0) return;
  if (k == 0 || (accumulate && bias.defined())) {
    if (k == 0 && !accumulate) out.zero_();
    if (bias.defined()) out.add_(bias);
    if (k == 0) return;
  }
  // B packed for this product: read where its rows or its columns lie in a row, else copied.
  at::Tensor packed = at::zeros({amx_packed_elements(n, k)}, at::kBFloat16);
  auto* packed_data = reinterpret_cast<uint16_t*>(packed.data_ptr());
  if (n == 1 || b.stride(1) == 1) {  // B [k, n], rows stride(0) apart
    pack(b.const_data_ptr<float>(), k, n, b.stride(0), true, packed_data);
  } else if (k == 1 || b.stride(0) == 1) {  // B^T [n, k], rows stride(1) apart
    pack(b.const_data_ptr<float>(), n, k, b.stride(1), false, packed_data);
  } else {
    const at::Tensor rows = b.contiguous();
    pack(rows.const_data_ptr<float>(), k, n, n, true, packed_data);
  }
  const at::Tensor x = k == 1 || a.stride(1) == 1 ? a : a.contiguous();
  multiply(x.const_data_ptr<float>(), x.stride(0), m, k, packed_data, n,
           bias.defined() && !accumulate ? bias.const_data_ptr<float>() : nullptr, accumulate,
           out.mutable_data_ptr<float>(), out.stride(0));
}

#else

at::Tensor amx_pack_weight(const at::Tensor&, bool) {
  TORCH_CHECK(false, "amx_pack_weight: AMX products exist on x86-64 only");
}

at::Tensor amx_linear(const at::Tensor&, const at::Tensor&, int64_t, const at::Tensor&) {
  TORCH_CHECK(false, "amx_linear: AMX products exist on x86-64 only");
}

void amx_gemm(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, const at::Tensor&) {
  TORCH_CHECK(false, "amx_gemm: AMX products exist on x86-64 only");
}

#endif

}  // namespace shardformer::kernels
