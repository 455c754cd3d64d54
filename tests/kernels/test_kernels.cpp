// The fused CPU kernels against ATen references computed in fp64, for every instruction set
// this CPU runs (DEFAULT, AVX2, AVX-512), over shapes with and without vector tails.
#include "kernel_table.h"
#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/kernel_timing.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace shardformer;

namespace {

struct Isa {
  std::string name;
  const kernels::KernelTable* table;
  std::string lacking;  // the CPU features this machine lacks for it ("": it runs here)
};

// Every table the kernels are compiled for; those this CPU cannot run are skipped by name.
std::vector<Isa> compiled_tables() {
  std::vector<Isa> isas{{"DEFAULT", &kernels::DEFAULT::table, ""}};
#if defined(__x86_64__)
  __builtin_cpu_init();
  const auto lacking = [](std::initializer_list<std::pair<const char*, bool>> features) {
    std::string missing;
    for (const auto& [name, present] : features) {
      if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    return missing;
  };
  isas.push_back({"AVX2", &kernels::AVX2::table,
                  lacking({{"avx2", __builtin_cpu_supports("avx2")},
                           {"fma", __builtin_cpu_supports("fma")}})});
  isas.push_back({"AVX512", &kernels::AVX512::table,
                  lacking({{"avx512f", __builtin_cpu_supports("avx512f")},
                           {"avx512bw", __builtin_cpu_supports("avx512bw")},
                           {"avx512vl", __builtin_cpu_supports("avx512vl")},
                           {"avx512dq", __builtin_cpu_supports("avx512dq")}})});
#endif
  return isas;
}

// max |got - want| / (scale + floor) over all elements; scale is the reference's own size.
double worst(const at::Tensor& got, const at::Tensor& want, const at::Tensor& scale, double floor) {
  return ((got.to(at::kDouble) - want).abs() / (scale + floor)).max().item<double>();
}

class Kernels : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!GetParam().lacking.empty()) {
      GTEST_SKIP() << GetParam().name << " kernels: this CPU lacks " << GetParam().lacking;
    }
  }
};

TEST_P(Kernels, SkinnyLinearMatchesFp64Product) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(0);
  const int threads = at::get_num_threads();
  // The products split their weight across ATen's threads: 3 threads cut k = 200 unevenly.
  for (const int use_threads : {1, 3}) {
    at::set_num_threads(use_threads);
    for (const int64_t m : {1, 2, 3, 4, 5, 8, 13, 14, 16, 27, 32}) {
      for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{
               {64, 1}, {77, 19}, {200, 37}, {768, 2304}, {3072, 131}, {64, 1013}}) {
        for (const bool k_major : {false, true}) {
          for (const bool with_bias : {false, true}) {
            const at::Tensor x = at::randn({m, k});
            const at::Tensor w = k_major ? at::randn({k, n}) : at::randn({n, k});
            const at::Tensor b = with_bias ? at::randn({n}) : at::Tensor();
            at::Tensor y = at::empty({m, n});
            t.skinny_linear(x.data_ptr<float>(), m, k, w.data_ptr<float>(), n, k_major,
                            with_bias ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
            const at::Tensor wd = (k_major ? w : w.t()).to(at::kDouble);  // [k, n]
            at::Tensor want = at::mm(x.to(at::kDouble), wd);
            // Rounding grows with sum |x w|: the error is measured relative to it.
            at::Tensor scale = at::mm(x.to(at::kDouble).abs(), wd.abs());
            if (with_bias) {
              want = want + b.to(at::kDouble);
              scale = scale + b.to(at::kDouble).abs();
            }
            EXPECT_LT(worst(y, want, scale, 1e-30), 1e-6)
                << "m " << m << " k " << k << " n " << n << " k_major " << k_major << " threads "
                << use_threads;
          }
        }
      }
    }
  }
  at::set_num_threads(threads);
}

// More rows than a row group (a prompt) take register tiles; each output still has one
// accumulator summed as a row group of 4 sums it, so a prompt's rows give the bits that the same
// rows give four at a time, with weight-row tails (n = 37) and a k tail past the vectors.
TEST_P(Kernels, SkinnyTiledRowsEqualRowGroupsBitwise) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(0);
  const int64_t k = 200 + 3, n = 37;
  for (const int64_t m : {12, 20, 28}) {
    const at::Tensor x = at::randn({m, k}), w = at::randn({n, k}), b = at::randn({n});
    at::Tensor tiled = at::empty({m, n}), grouped = at::empty({m, n});
    t.skinny_linear(x.data_ptr<float>(), m, k, w.data_ptr<float>(), n, false, b.data_ptr<float>(),
                    tiled.data_ptr<float>());
    for (int64_t row = 0; row < m; row += 4) {
      t.skinny_linear(x.data_ptr<float>() + row * k, 4, k, w.data_ptr<float>(), n, false,
                      b.data_ptr<float>(), grouped.data_ptr<float>() + row * n);
    }
    EXPECT_TRUE(at::equal(tiled, grouped)) << "m " << m;
  }
}

// Several products of one x in one pass (q / k / v), and the SiLU-gated pair (gate / up), over
// row groups with tails, weights whose rows cross the threads' split, with and without biases.
TEST_P(Kernels, SkinnyGroupAndSiluGateMatchFp64Products) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(0);
  const int threads = at::get_num_threads();
  for (const int use_threads : {1, 3}) {
    at::set_num_threads(use_threads);
    for (const int64_t m : {1, 3, 8, 13, 14, 27}) {
      for (const int64_t k : {77, 576}) {
        const at::Tensor x = at::randn({m, k});
        const at::Tensor xd = x.to(at::kDouble);
        // q / k / v of unequal sizes, the middle one without a bias.
        const std::vector<int64_t> sizes{37, 13, 64};
        std::vector<at::Tensor> w, b, y;
        std::vector<const float*> wp, bp;
        std::vector<float*> yp;
        for (size_t i = 0; i < sizes.size(); ++i) {
          w.push_back(at::randn({sizes[i], k}));
          b.push_back(i == 1 ? at::Tensor() : at::randn({sizes[i]}));
          y.push_back(at::empty({m, sizes[i]}));
          wp.push_back(w[i].data_ptr<float>());
          bp.push_back(b[i].defined() ? b[i].data_ptr<float>() : nullptr);
          yp.push_back(y[i].data_ptr<float>());
        }
        t.skinny_group(x.data_ptr<float>(), m, k, 3, wp.data(), sizes.data(), bp.data(), yp.data());
        for (size_t i = 0; i < sizes.size(); ++i) {
          const at::Tensor wd = w[i].t().to(at::kDouble);
          at::Tensor want = at::mm(xd, wd), scale = at::mm(xd.abs(), wd.abs());
          if (b[i].defined()) {
            want = want + b[i].to(at::kDouble);
            scale = scale + b[i].to(at::kDouble).abs();
          }
          EXPECT_LT(worst(y[i], want, scale, 1e-30), 1e-6)
              << "weight " << i << " m " << m << " k " << k << " threads " << use_threads;
        }
        // silu(x Wg^T + bg) * (x Wu^T + bu): the error bound carries each product's rounding
        // through the gate (|silu'| < 1.1) and the up factor.
        const int64_t n = 150;
        const at::Tensor wg = at::randn({n, k}), wu = at::randn({n, k}), bu = at::randn({n});
        at::Tensor up = at::empty({m, n}), h = at::empty({m, n});
        t.skinny_silu_gate(x.data_ptr<float>(), m, k, wg.data_ptr<float>(), nullptr,
                           wu.data_ptr<float>(), bu.data_ptr<float>(), n, up.data_ptr<float>(),
                           h.data_ptr<float>());
        const at::Tensor g = at::mm(xd, wg.t().to(at::kDouble));
        const at::Tensor u = at::mm(xd, wu.t().to(at::kDouble)) + bu.to(at::kDouble);
        const at::Tensor g_scale = at::mm(xd.abs(), wg.t().to(at::kDouble).abs());
        const at::Tensor u_scale =
            at::mm(xd.abs(), wu.t().to(at::kDouble).abs()) + bu.to(at::kDouble).abs();
        const at::Tensor silu = g * at::sigmoid(g);
        EXPECT_LT(worst(h, silu * u, 1.1 * g_scale * u.abs() + silu.abs() * u_scale, 1e-30), 1e-6)
            << "silu gate m " << m << " k " << k << " threads " << use_threads;
      }
    }
  }
  at::set_num_threads(threads);
}

// The kernels' own GEMM (block attention's) over shapes with row, column and depth tails and past
// each cache block (m > 120, n > 2048, k > 768), operands transposed (A packed) or sliced (A read
// in place, its last partial micro-panel packed), out a column slice, with a bias, accumulating,
// and split over 1 and 3 threads.
TEST_P(Kernels, GemmMatchesFp64Product) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(0);
  struct Case {
    int64_t m, n, k;
    bool a_t, b_t, bias, accumulate;
  };
  const std::vector<Case> cases{
      {1, 1, 1, false, false, false, false},      {5, 17, 7, false, true, true, false},
      {6, 64, 768, false, false, true, false},    {7, 65, 769, true, true, false, true},
      {13, 200, 64, false, true, true, true},     {130, 33, 1600, true, false, true, false},
      {37, 2100, 40, false, false, false, false}, {2, 2100, 40, false, true, true, false},
      {200, 3, 5, true, true, false, false},      {9, 130, 0, false, false, true, false},
      {9, 130, 0, false, false, false, true},     {250, 70, 900, false, true, true, true}};
  for (const int use_threads : {1, 3}) {
    for (const Case& c : cases) {
      // a [m, k] and b [k, n] as views: transposes of contiguous matrices, or (a_t, b_t false)
      // column slices of wider ones (a's rows, read in place, k + 3 apart).
      const at::Tensor a =
          c.a_t ? at::randn({c.k, c.m}).t() : at::randn({c.m, c.k + 3}).narrow(1, 2, c.k);
      const at::Tensor b =
          c.b_t ? at::randn({c.n, c.k}).t() : at::randn({c.k, c.n + 3}).narrow(1, 2, c.n);
      const at::Tensor bias = c.bias ? at::randn({c.n}) : at::Tensor();
      const at::Tensor wide = at::randn({c.m, c.n + 5});
      const at::Tensor wide_before = wide.clone();
      const at::Tensor out = wide.narrow(1, 1, c.n);  // rows strided by n + 5
      const at::Tensor before = out.to(at::kDouble);
      const at::Tensor work =
          at::empty({t.gemm_workspace(c.m, c.n, c.k, b.stride(1), use_threads, false)});
      t.gemm(c.m, c.n, c.k, a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(),
             b.stride(0), b.stride(1), c.bias ? bias.data_ptr<float>() : nullptr, c.accumulate,
             out.data_ptr<float>(), out.stride(0), use_threads, work.data_ptr<float>(), nullptr);
      const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
      at::Tensor want = at::mm(a64, b64);
      at::Tensor scale = at::mm(a64.abs(), b64.abs());
      if (c.bias) {
        want = want + bias.to(at::kDouble);
        scale = scale + bias.to(at::kDouble).abs();
      }
      if (c.accumulate) {
        want = want + before;
        scale = scale + before.abs();
      }
      const std::string what = "m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " +
                               std::to_string(c.k) + " threads " + std::to_string(use_threads);
      EXPECT_LT(worst(out, want, scale, 1e-30), 1e-6) << what;
      // The columns beside the slice are untouched.
      EXPECT_TRUE(at::equal(wide.narrow(1, 0, 1), wide_before.narrow(1, 0, 1))) << what;
      EXPECT_TRUE(at::equal(wide.narrow(1, c.n + 1, 4), wide_before.narrow(1, c.n + 1, 4))) << what;
      // B packed whole once: the same bits, into the same columns only.
      const at::Tensor packed = at::empty({t.packed_b_size(c.k, c.n)});
      t.pack_b_whole(c.k, c.n, b.data_ptr<float>(), b.stride(0), b.stride(1),
                     packed.data_ptr<float>());
      const at::Tensor again_wide = wide_before.clone();
      const at::Tensor again = again_wide.narrow(1, 1, c.n);
      const at::Tensor packed_work =
          at::empty({t.gemm_workspace(c.m, c.n, c.k, 1, use_threads, true)});
      t.gemm(c.m, c.n, c.k, a.data_ptr<float>(), a.stride(0), a.stride(1), nullptr, 0, 1,
             c.bias ? bias.data_ptr<float>() : nullptr, c.accumulate, again.data_ptr<float>(),
             again.stride(0), use_threads, packed_work.data_ptr<float>(), packed.data_ptr<float>());
      EXPECT_TRUE(at::equal(again_wide, wide)) << what << ", B packed whole";
    }
  }
}

// Long sums: the GEMM adds k in chunks of 192 products (gemm_impl.cpp), which keeps it as close
// to the fp64 product as MKL. Here 2.7-2.9e-7; chains of 768 products gave 6.3e-7.
TEST_P(Kernels, GemmRoundingStaysFlatOverLongSums) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(1);
  const int64_t m = 48, n = 64, k = 4096;
  // Positive terms: nothing cancels, and a single chain's rounding would grow with k.
  const at::Tensor a = at::rand({m, k}), b = at::rand({k, n});
  at::Tensor c = at::empty({m, n});
  const at::Tensor work = at::empty({t.gemm_workspace(m, n, k, 1, 2, false)});
  t.gemm(m, n, k, a.data_ptr<float>(), k, 1, b.data_ptr<float>(), n, 1, nullptr, false,
         c.data_ptr<float>(), n, 2, work.data_ptr<float>(), nullptr);
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  EXPECT_LT(worst(c, at::mm(a64, b64), at::mm(a64.abs(), b64.abs()), 1e-30), 4e-7);
}

// Block attention against fp64 softmax(q k^T * scale, masked where causal) v: queries shorter
// than, equal to and past its query block (64), causal or over keys fewer and more than the
// queries (and past a step of the product with the values, 128 keys), head sizes with vector
// tails, q, k, v as the transposed [batch, seq, heads, dim] views attention layers make, split
// over 1 and 3 threads.
TEST_P(Kernels, BlockAttentionMatchesFp64Softmax) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(2);
  const int threads = at::get_num_threads();
  const auto strides = [](const at::Tensor& x) {
    return kernels::AttentionStrides{x.stride(0), x.stride(1), x.stride(2)};
  };
  for (const int use_threads : {1, 3}) {
    at::set_num_threads(use_threads);
    for (const int64_t queries : {1, 5, 64, 65, 130}) {
      for (const int64_t keys : {queries, int64_t{3}, int64_t{197}}) {
        for (const int mode : {0, 1, 2}) {  // causal, every key, right padding
          const bool causal = mode == 0, padded = mode == 2;
          if (causal && keys != queries) continue;
          for (const int64_t dim : {8, 64, 80}) {
            const int64_t batch = 2, heads = 3;
            // Right padding: the first batch sees every key, the second a third of them (none
            // where there is one key).
            const at::Tensor counts = at::tensor({keys, keys / 3}, at::kLong);
            const auto make = [&](int64_t rows) {
              return at::randn({batch, rows, heads, dim}).transpose(1, 2);
            };
            const at::Tensor q = make(queries) * 2, k = make(keys) * 2, v = make(keys);
            const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
            at::Tensor out = at::empty({batch, queries, heads, dim}).transpose(1, 2);
            t.block_attention(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                              out.data_ptr<float>(),
                              {batch, heads, queries, keys, dim, strides(q), strides(k), strides(v),
                               strides(out), causal, padded ? counts.data_ptr<int64_t>() : nullptr},
                              static_cast<float>(scale));
            at::Tensor scores =
                at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) * scale;
            if (causal) {
              const at::Tensor mask = at::ones({queries, keys}, at::kBool).tril();
              scores = scores.masked_fill(mask.logical_not(), -INFINITY);
            }
            if (padded) {
              const at::Tensor seen = at::arange(keys).view({1, 1, 1, keys}) <
                                      counts.view({batch, 1, 1, 1});  // [batch, 1, 1, keys]
              scores = scores.masked_fill(seen.logical_not(), -INFINITY);
            }
            // A batch that sees no key gets zeros (softmax over nothing is NaN in fp64).
            const at::Tensor probs = at::softmax(scores, -1).nan_to_num(0.0);
            const at::Tensor want = at::matmul(probs, v.to(at::kDouble));
            // Rounding grows with the terms: sum_j p_ij |v_j|.
            const at::Tensor size = at::matmul(probs, v.to(at::kDouble).abs());
            EXPECT_LT(worst(out, want, size, 1e-30), 1e-5)
                << "queries " << queries << " keys " << keys << " mode " << mode << " dim " << dim
                << " threads " << use_threads;
          }
        }
      }
    }
  }
  at::set_num_threads(threads);
}

// Decoding's attention over a KV cache against fp64 softmax: grouped heads (9 query heads over
// 3 KV heads, as SmolLM2), 1 to 3 queries (causal or masked), caches of 1 to 130 keys read through
// a longer buffer's strides, head sizes with vector tails, masks broadcast over the batch or the
// queries and a query that sees no key (zeros), over 1 and 3 threads.
TEST_P(Kernels, CachedAttentionMatchesFp64Softmax) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(3);
  const int threads = at::get_num_threads();
  const int64_t batch = 2, heads = 9, kv_heads = 3;
  for (const int use_threads : {1, 3}) {
    at::set_num_threads(use_threads);
    for (const int64_t keys : {1, 17, 130}) {
      for (const int64_t queries : {1, 3}) {
        for (const int64_t dim : {8, 64, 70}) {
          for (const bool masked : {false, true}) {
            const bool causal = !masked && keys >= queries;
            const at::Tensor q = at::randn({batch, queries, heads, dim}).transpose(1, 2) * 2;
            const at::Tensor k = at::randn({batch, kv_heads, 140, dim}).narrow(2, 0, keys) * 2;
            const at::Tensor v = at::randn({batch, kv_heads, 140, dim}).narrow(2, 0, keys);
            at::Tensor mask = at::rand({batch, 1, queries, keys}) > 0.3;
            if (masked) mask.select(2, 0).select(0, 1).fill_(false);  // query 0 of batch 1: none
            // Unmasked runs are causal where the cache holds the queries' positions.
            const at::Tensor seen = masked ? mask
                                           : (causal ? at::ones({queries, keys}, at::kBool)
                                                           .tril(keys - queries)
                                                           .expand_as(mask)
                                                     : at::ones_like(mask));
            const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
            at::Tensor out = at::empty({batch, queries, heads, dim}).transpose(1, 2);
            const auto strides = [](const at::Tensor& x) {
              return kernels::AttentionStrides{x.stride(0), x.stride(1), x.stride(2)};
            };
            const kernels::CachedAttentionShape shape{
                batch,      heads,      kv_heads,   queries,      keys,           dim,
                strides(q), strides(k), strides(v), strides(out), mask.stride(0), mask.stride(2),
                causal};
            t.cached_attention(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                               masked ? mask.data_ptr<bool>() : nullptr, out.data_ptr<float>(),
                               shape, static_cast<float>(scale));
            const at::Tensor k64 = k.to(at::kDouble).repeat_interleave(heads / kv_heads, 1);
            const at::Tensor v64 = v.to(at::kDouble).repeat_interleave(heads / kv_heads, 1);
            const at::Tensor scores = at::matmul(q.to(at::kDouble), k64.transpose(-2, -1)) * scale;
            const at::Tensor probs =  // fully masked rows: 0, not NaN
                at::softmax(scores.masked_fill(seen.logical_not(), -INFINITY), -1).nan_to_num(0.0);
            const at::Tensor want = at::matmul(probs, v64);
            const at::Tensor size = at::matmul(probs, v64.abs());
            EXPECT_LT(worst(out, want, size, 1e-30), 1e-5)
                << "keys " << keys << " queries " << queries << " dim " << dim << " masked "
                << masked << " causal " << causal << " threads " << use_threads;
            if (masked) {
              EXPECT_TRUE(at::equal(out.select(0, 1).select(1, 0), at::zeros({heads, dim})));
            }
          }
        }
      }
    }
  }
  at::set_num_threads(threads);
}

TEST_P(Kernels, BiasGeluTanhMatchesHfFormula) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(1);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 37}, {64, 3072}, {5, 1000}}) {
    for (const bool with_bias : {false, true}) {
      const at::Tensor x = at::randn({rows, cols}) * 4;  // the tails of tanh included
      const at::Tensor b = with_bias ? at::randn({cols}) : at::Tensor();
      at::Tensor y = at::empty_like(x);
      t.bias_gelu_tanh(x.data_ptr<float>(), with_bias ? b.data_ptr<float>() : nullptr,
                       y.data_ptr<float>(), rows, cols);
      at::Tensor v = x.to(at::kDouble);
      if (with_bias) v = v + b.to(at::kDouble);
      const at::Tensor want =
          0.5 * v * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * at::pow(v, 3.0))));
      // Where tanh is near -1, 1 + tanh cancels in any fp32 evaluation (HF's as well): the
      // error is measured against the input's size there.
      EXPECT_LT(worst(y, want, at::maximum(want.abs(), v.abs()), 1e-30), 1e-6)
          << rows << " x " << cols;
    }
  }
}

// The all-reduce's sum: bit for bit ATen's additions in the same order (every rank adds its
// slots so, and HF's tolerance rests on a reduction followed by `+ bias`).
TEST_P(Kernels, SumTermsAddsInRankOrder) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(2);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 37}, {257, 768}, {2, 5000}}) {
    for (const int64_t n : {2, 3, 4}) {
      for (const bool with_bias : {false, true}) {
        std::vector<at::Tensor> terms;
        std::vector<const float*> data;
        for (int64_t i = 0; i < n; ++i) {
          terms.push_back(at::randn({rows, cols}) * std::pow(10.0, static_cast<double>(i)));
          data.push_back(terms.back().data_ptr<float>());
        }
        const at::Tensor b = with_bias ? at::randn({cols}) : at::Tensor();
        at::Tensor out = at::empty({rows, cols});
        t.sum_terms(data.data(), n, with_bias ? b.data_ptr<float>() : nullptr,
                    out.data_ptr<float>(), rows, cols);
        at::Tensor want = terms[0] + terms[1];
        for (int64_t i = 2; i < n; ++i) want = want + terms[i];
        if (with_bias) want = want + b;
        EXPECT_TRUE(at::equal(out, want)) << rows << " x " << cols << ", " << n << " terms";
      }
    }
  }
}

TEST_P(Kernels, GeluTanhBackwardMatchesFp64Derivative) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(7);
  for (const int64_t n : {1, 7, 64, 3 * 3072 + 5}) {
    const at::Tensor x = at::randn({n}) * 4, g = at::randn({n});  // both tails of the tanh
    at::Tensor dx = at::empty_like(x);
    t.gelu_tanh_backward(x.data_ptr<float>(), g.data_ptr<float>(), dx.data_ptr<float>(), n);
    const at::Tensor v = x.to(at::kDouble), g64 = g.to(at::kDouble);
    const double beta = std::sqrt(2.0 / M_PI), kappa = 0.044715;
    const at::Tensor th = at::tanh(beta * (v + kappa * v.pow(3)));
    const at::Tensor left = 0.5 * (1.0 + th);
    const at::Tensor right = 0.5 * v * (1.0 - th * th) * beta * (1.0 + 3.0 * kappa * v * v);
    // Relative to the sizes of what cancels: 1 + t and 1 - t^2 lose all their digits in any fp32
    // evaluation (HF's autograd too) where the tanh saturates.
    const at::Tensor size = 0.5 * (1.0 + th.abs()) +
                            0.5 * v.abs() * (1.0 + th * th) * beta * (1.0 + 3.0 * kappa * v * v);
    EXPECT_LT(worst(dx, g64 * (left + right), g64.abs() * size, 1e-30), 1e-6) << n;
  }
}

// The all-reduce, the residual add and the next norm in one pass: bit for bit sum_terms followed
// by the residual add and add_layer_norm, or rms_norm (so fusing them changes no result), for
// one to four terms, with and without biases, and without the norm.
TEST_P(Kernels, SumAddNormEqualsTheSeparateKernels) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(4);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 37}, {129, 768}, {2, 4099}}) {
    for (const int64_t n : {1, 2, 4}) {
      for (const bool biases : {false, true}) {
        std::vector<at::Tensor> terms;
        std::vector<const float*> data;
        for (int64_t i = 0; i < n; ++i) {
          terms.push_back(at::randn({rows, cols}) * (i + 1));
          data.push_back(terms.back().data_ptr<float>());
        }
        const at::Tensor residual = at::randn({rows, cols}) * 2 + 1;
        const at::Tensor b = biases ? at::randn({cols}) : at::Tensor();
        const at::Tensor w = at::randn({cols}), lb = biases ? at::randn({cols}) : at::Tensor();
        const auto ptr = [](const at::Tensor& v) {
          return v.defined() ? v.data_ptr<float>() : nullptr;
        };
        at::Tensor summed = terms[0].clone();  // the separate kernels
        if (n >= 2) t.sum_terms(data.data(), n, ptr(b), summed.data_ptr<float>(), rows, cols);
        if (n == 1 && biases) summed = summed + b;
        at::Tensor want_sum = at::empty_like(residual), want_y = at::empty_like(residual);
        t.add_layer_norm(residual.data_ptr<float>(), summed.data_ptr<float>(), w.data_ptr<float>(),
                         ptr(lb), want_sum.data_ptr<float>(), want_y.data_ptr<float>(), rows, cols,
                         1e-5f);
        at::Tensor want_rms = at::empty_like(residual);
        t.rms_norm(want_sum.data_ptr<float>(), w.data_ptr<float>(), want_rms.data_ptr<float>(),
                   rows, cols, 1e-6f);
        at::Tensor sum = at::empty_like(residual), y = at::empty_like(residual);
        t.sum_add_norm(data.data(), n, ptr(b), residual.data_ptr<float>(), /*rms=*/false,
                       w.data_ptr<float>(), ptr(lb), sum.data_ptr<float>(), y.data_ptr<float>(),
                       rows, cols, 1e-5f);
        const std::string what = std::to_string(rows) + " x " + std::to_string(cols) + ", " +
                                 std::to_string(n) + " terms";
        EXPECT_TRUE(at::equal(sum, want_sum)) << what;
        EXPECT_TRUE(at::equal(sum, residual + summed)) << what;
        EXPECT_TRUE(at::equal(y, want_y)) << what;
        at::Tensor rms_sum = at::empty_like(residual), rms_y = at::empty_like(residual);
        t.sum_add_norm(data.data(), n, ptr(b), residual.data_ptr<float>(), /*rms=*/true,
                       w.data_ptr<float>(), nullptr, rms_sum.data_ptr<float>(),
                       rms_y.data_ptr<float>(), rows, cols, 1e-6f);
        EXPECT_TRUE(at::equal(rms_sum, want_sum)) << what << ", RMSNorm";
        EXPECT_TRUE(at::equal(rms_y, want_rms)) << what << ", RMSNorm";
        at::Tensor only_sum = at::empty_like(residual);  // no norm: the residual stream alone
        t.sum_add_norm(data.data(), n, ptr(b), residual.data_ptr<float>(), false, nullptr, nullptr,
                       only_sum.data_ptr<float>(), nullptr, rows, cols, 1e-5f);
        EXPECT_TRUE(at::equal(only_sum, want_sum)) << what << ", no norm";
      }
    }
  }
}

TEST_P(Kernels, AddLayerNormMatchesFp64LayerNorm) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(2);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 19}, {128, 768}, {7, 4099}}) {
    for (const bool with_bias : {false, true}) {
      const at::Tensor x = at::randn({rows, cols}) * 3 + 1, r = at::randn({rows, cols});
      const at::Tensor w = at::randn({cols}), b = with_bias ? at::randn({cols}) : at::Tensor();
      at::Tensor sum = at::empty_like(x), y = at::empty_like(x);
      t.add_layer_norm(x.data_ptr<float>(), r.data_ptr<float>(), w.data_ptr<float>(),
                       with_bias ? b.data_ptr<float>() : nullptr, sum.data_ptr<float>(),
                       y.data_ptr<float>(), rows, cols, 1e-5f);
      EXPECT_TRUE(at::equal(sum, x + r)) << rows << " x " << cols;
      const at::Tensor s64 = sum.to(at::kDouble);
      const at::Tensor mean = s64.mean(-1, true);
      const at::Tensor rstd = at::rsqrt(s64.var(-1, false, true) + 1e-5);
      at::Tensor want = (s64 - mean) * rstd * w.to(at::kDouble);
      // Relative to the terms before they cancel: sum and mean, weight * normalised and bias.
      at::Tensor scale = (s64.abs() + mean.abs()) * rstd * w.to(at::kDouble).abs();
      if (with_bias) {
        want = want + b.to(at::kDouble);
        scale = scale + b.to(at::kDouble).abs();
      }
      EXPECT_LT(worst(y, want, scale, 1e-30), 1e-6) << rows << " x " << cols;
    }
  }
}

TEST_P(Kernels, RmsNormMatchesFp64Formula) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(3);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 19}, {128, 768}, {7, 4099}}) {
    const at::Tensor x = at::randn({rows, cols}) * 3, w = at::randn({cols});
    at::Tensor y = at::empty_like(x);
    t.rms_norm(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rows, cols, 1e-6f);
    const at::Tensor x64 = x.to(at::kDouble);
    const at::Tensor want = w.to(at::kDouble) * x64 * at::rsqrt(x64.pow(2).mean(-1, true) + 1e-6);
    EXPECT_LT(worst(y, want, want.abs(), 1e-30), 1e-6) << rows << " x " << cols;
  }
}

TEST_P(Kernels, RotaryMatchesHfFormula) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(4);
  // tokens, heads, head_dim, rotary_dim: halves with and without vector tails, partial rotary.
  for (const auto& [tokens, heads, head_dim, rotary_dim] : std::vector<std::array<int64_t, 4>>{
           {1, 1, 2, 2}, {5, 3, 64, 64}, {7, 2, 80, 32}, {3, 4, 34, 34}, {2, 2, 128, 96}}) {
    const at::Tensor x = at::randn({tokens, heads, head_dim});
    // Distinct halves (HF's tables repeat one half): a kernel mixing them up fails.
    const at::Tensor cos = at::randn({tokens, rotary_dim}), sin = at::randn({tokens, rotary_dim});
    at::Tensor y = at::empty_like(x);
    t.rotary(x.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(), y.data_ptr<float>(),
             tokens, heads, head_dim, rotary_dim);
    const int64_t half = rotary_dim / 2;
    const at::Tensor r = x.narrow(-1, 0, rotary_dim).to(at::kDouble);
    const at::Tensor rotated = at::cat({-r.narrow(-1, half, half), r.narrow(-1, 0, half)}, -1);
    const at::Tensor c = cos.to(at::kDouble).unsqueeze(1), s = sin.to(at::kDouble).unsqueeze(1);
    const at::Tensor want = r * c + rotated * s;
    EXPECT_LT(worst(y.narrow(-1, 0, rotary_dim), want, (r * c).abs() + (rotated * s).abs(), 1e-30),
              1e-6)
        << tokens << " x " << heads << " x " << head_dim << " rotary " << rotary_dim;
    EXPECT_TRUE(at::equal(y.narrow(-1, rotary_dim, head_dim - rotary_dim),
                          x.narrow(-1, rotary_dim, head_dim - rotary_dim)));
  }
}

TEST_P(Kernels, SoftmaxStatsMatchFp64) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(5);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 17}, {4, 1013}, {2, 50257}, {5, 33}}) {
    const at::Tensor x = at::randn({rows, cols}) * 5 + 3;
    at::Tensor max = at::empty({rows}), sum = at::empty({rows});
    t.softmax_stats(x.data_ptr<float>(), rows, cols, max.data_ptr<float>(), sum.data_ptr<float>());
    const at::Tensor want_max = std::get<0>(x.max(-1));
    EXPECT_TRUE(at::equal(max, want_max)) << rows << " x " << cols;
    const at::Tensor want_sum =
        (x.to(at::kDouble) - want_max.to(at::kDouble).unsqueeze(-1)).exp().sum(-1);
    EXPECT_LT(worst(sum, want_sum, want_sum, 1e-30), 1e-6) << rows << " x " << cols;
  }
}

TEST_P(Kernels, SoftmaxCrossEntropyGradMatchesFp64) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(6);
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 17}, {6, 1013}, {2, 50257}}) {
    const at::Tensor x = at::randn({rows, cols}) * 4;
    const at::Tensor max = std::get<0>(x.max(-1));
    const at::Tensor sum = (x - max.unsqueeze(-1)).exp().sum(-1);
    const at::Tensor target = at::randint(-1, cols, {rows}, at::kLong);  // -1: not here
    const at::Tensor scale = at::randn({rows});
    at::Tensor grad = at::empty_like(x);
    t.softmax_xent_grad(x.data_ptr<float>(), max.data_ptr<float>(), sum.data_ptr<float>(),
                        target.data_ptr<int64_t>(), scale.data_ptr<float>(), grad.data_ptr<float>(),
                        rows, cols);
    const at::Tensor s64 = scale.to(at::kDouble).unsqueeze(-1);
    // x - max rounds in fp32 in every implementation (ATen's and HF's too), by up to |x - max|
    // ulps after exp: the reference takes that difference as fp32 computes it, so that what is
    // measured is the kernel's own error.
    const at::Tensor softmax =
        (x - max.unsqueeze(-1)).to(at::kDouble).exp() / sum.to(at::kDouble).unsqueeze(-1);
    const at::Tensor one_hot =
        at::one_hot(target.clamp_min(0), cols).to(at::kDouble) * (target >= 0).unsqueeze(-1);
    const at::Tensor want = (softmax - one_hot) * s64;
    EXPECT_LT(worst(grad, want, (softmax + one_hot) * s64.abs(), 1e-30), 1e-6)
        << rows << " x " << cols;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, Kernels, ::testing::ValuesIn(compiled_tables()),
                         [](const auto& info) { return info.param.name; });

// The tensor entry points: shapes, layouts and refusals.
TEST(KernelEntryPoints, SkinnyLinearKeepsLeadingDimsAndRefusesWhatItCannotServe) {
  const at::Tensor x = at::randn({2, 3, 8}), w = at::randn({5, 8}), b = at::randn({5});
  const at::Tensor y = kernels::skinny_linear(x, w, b, /*k_major=*/false);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_TRUE(at::allclose(y, at::linear(x, w, b), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(kernels::skinny_linear(x, w.t().contiguous(), b, /*k_major=*/true), y,
                           1e-5, 1e-6));
  EXPECT_TRUE(kernels::skinny_linear_applies(at::randn({kernels::kSkinnyRows, 8}), w));
  EXPECT_FALSE(kernels::skinny_linear_applies(at::randn({kernels::kSkinnyRows + 1, 8}),
                                              w));                     // too many rows
  EXPECT_FALSE(kernels::skinny_linear_applies(x, w.t()));              // strided
  EXPECT_FALSE(kernels::skinny_linear_applies(x.to(at::kDouble), w));  // fp64
  EXPECT_THROW(kernels::skinny_linear(x, at::randn({5, 9}), b, false), c10::Error);  // k differs
  EXPECT_THROW(kernels::skinny_linear(x, w, at::randn({4}), false), c10::Error);     // bias size
}

// One pass over q / k / v gives skinny_linear's bits for each; the SiLU gate gives ATen's
// silu(gate) * up within rounding; what either cannot serve is refused.
TEST(KernelEntryPoints, SkinnyProductsAndSiluGateEqualTheSeparateOpsAndRefuseWhatTheyCannotServe) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({2, 1, 24});
  const std::vector<at::Tensor> w{at::randn({24, 24}), at::randn({8, 24}), at::randn({8, 24})};
  const std::vector<at::Tensor> b{at::randn({24}), at::Tensor(), at::randn({8})};
  const std::vector<at::Tensor> y = kernels::skinny_products(x, w, b);
  ASSERT_EQ(y.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(y[i].sizes(), (std::vector<int64_t>{2, 1, w[i].size(0)}));
    EXPECT_TRUE(at::equal(y[i], kernels::skinny_linear(x, w[i], b[i], false))) << i;
  }
  const at::Tensor wg = at::randn({40, 24}), wu = at::randn({40, 24}), bg = at::randn({40});
  const at::Tensor h = kernels::skinny_silu_gate(x, wg, bg, wu, {});
  EXPECT_EQ(h.sizes(), (std::vector<int64_t>{2, 1, 40}));
  EXPECT_TRUE(at::allclose(h, at::silu(at::linear(x, wg, bg)) * at::linear(x, wu), 1e-5, 1e-6));

  EXPECT_THROW(kernels::skinny_products(x, {w[0], at::randn({8, 23})}, {{}, {}}),
               c10::Error);                                                         // k differs
  EXPECT_THROW(kernels::skinny_products(x, {w[0]}, {b[0], b[2]}), c10::Error);      // biases
  EXPECT_THROW(kernels::skinny_products(x, {w[0]}, {at::randn({5})}), c10::Error);  // bias size
  EXPECT_THROW(kernels::skinny_products(at::randn({kernels::kSkinnyRows + 1, 24}), {w[0]}, {{}}),
               c10::Error);  // too many rows
  EXPECT_THROW(kernels::skinny_silu_gate(x, wg, {}, at::randn({41, 24}), {}), c10::Error);
  EXPECT_THROW(kernels::skinny_silu_gate(x, wg, at::randn({39}), wu, {}), c10::Error);
  EXPECT_THROW(kernels::skinny_silu_gate(x, wg.t(), {}, wu, {}), c10::Error);  // strided
}

// On each library (ATen's, OpenBLAS, oneDNN, and the AMX tiles where they exist), whatever this
// CPU picks.
TEST(KernelEntryPoints, GemmAndLinearKeepLeadingDimsWriteSlicesAndRefuseWhatTheyCannotServe) {
  const kernels::GemmBackend picked = kernels::gemm_backend();
  std::vector<kernels::GemmBackend> backends = {
      kernels::GemmBackend::kAten, kernels::GemmBackend::kOpenBlas, kernels::GemmBackend::kOneDnn};
  if (kernels::amx_available()) backends.push_back(kernels::GemmBackend::kAmx);
  for (const kernels::GemmBackend backend : backends) {
    kernels::set_gemm_backend(backend);
    SCOPED_TRACE(kernels::gemm_name());
    const at::Tensor x = at::randn({2, 3, 40}), w = at::randn({70, 40}), b = at::randn({70});
    const at::Tensor y = kernels::linear(x, w, b, /*k_major=*/false);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 70}));
    EXPECT_TRUE(at::allclose(y, at::linear(x, w, b), 1e-5, 1e-5));
    EXPECT_TRUE(
        at::allclose(kernels::linear(x, w.t().contiguous(), b, /*k_major=*/true), y, 1e-5, 1e-5));
    // Into columns 10..79 of a wider matrix, adding to what is there, with and without a bias.
    for (const bool with_bias : {false, true}) {
      at::Tensor wide = at::ones({6, 90});
      kernels::gemm(x.view({6, 40}), w.t(), with_bias ? b : at::Tensor(), /*accumulate=*/true,
                    wide.narrow(1, 10, 70));
      const at::Tensor want =
          at::mm(x.view({6, 40}), w.t()) + 1 + (with_bias ? b : at::zeros({70}));
      EXPECT_TRUE(at::allclose(wide.narrow(1, 10, 70), want, 1e-5, 1e-5)) << "bias " << with_bias;
      EXPECT_TRUE(at::equal(wide.narrow(1, 0, 10), at::ones({6, 10})));
      EXPECT_TRUE(at::equal(wide.narrow(1, 80, 10), at::ones({6, 10})));
    }
    const at::Tensor out = at::empty({6, 70});
    EXPECT_THROW(kernels::gemm(x.view({6, 40}), w, {}, false, out), c10::Error);  // k differs
    EXPECT_THROW(kernels::gemm(x.view({6, 40}), w.t(), {}, false, at::empty({70, 6}).t()),
                 c10::Error);  // out's rows strided
    EXPECT_THROW(kernels::gemm(x.view({6, 40}).to(at::kDouble), w.t(), {}, false, out),
                 c10::Error);                                                     // fp64
    EXPECT_THROW(kernels::linear(x, w, at::randn({69}), false), c10::Error);      // bias size
    EXPECT_THROW(kernels::linear(x, at::randn({70, 41}), b, false), c10::Error);  // k differs
  }
  kernels::set_gemm_backend(picked);
}

TEST(KernelEntryPoints, BlockAttentionMatchesSdpaAndRefusesWhatItCannotServe) {
  const at::Tensor q = at::randn({2, 4, 70, 16}), k = at::randn({2, 4, 70, 16}),
                   v = at::randn({2, 4, 70, 16});
  for (const bool causal : {true, false}) {
    const at::Tensor out = kernels::block_attention(q, k, v, 0.25, causal);
    EXPECT_EQ(out.sizes(), q.sizes());
    EXPECT_TRUE(out.transpose(1, 2).is_contiguous());  // heads merge as a view
    EXPECT_TRUE(at::allclose(out, at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, 0.25),
                             1e-5, 1e-5));
  }
  // Fewer keys than queries, every key seen; no key at all: zeros.
  const at::Tensor few = kernels::block_attention(q, k.narrow(2, 0, 9), v.narrow(2, 0, 9), 0.25,
                                                  /*causal=*/false);
  EXPECT_TRUE(at::allclose(few,
                           at::scaled_dot_product_attention(q, k.narrow(2, 0, 9), v.narrow(2, 0, 9),
                                                            {}, 0.0, false, 0.25),
                           1e-5, 1e-5));
  EXPECT_TRUE(at::equal(
      kernels::block_attention(q, k.narrow(2, 0, 0), v.narrow(2, 0, 0), 0.25, /*causal=*/false),
      at::zeros_like(q)));
  EXPECT_THROW(kernels::block_attention(q, k.narrow(2, 0, 69), v.narrow(2, 0, 69), 0.25, true),
               c10::Error);  // causal needs as many keys as queries
  // Right padding: batch 0 sees 70 keys, batch 1 the first 30, as a boolean mask tells SDPA.
  const at::Tensor counts = at::tensor({int64_t{70}, int64_t{30}});
  const at::Tensor mask = (at::arange(70).view({1, 70}) < counts.view({2, 1})).view({2, 1, 1, 70});
  EXPECT_TRUE(at::allclose(kernels::block_attention(q, k, v, 0.25, false, counts),
                           at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, 0.25), 1e-5,
                           1e-5));
  EXPECT_THROW(kernels::block_attention(q, k, v, 0.25, true, counts), c10::Error);  // causal
  EXPECT_THROW(kernels::block_attention(q, k, v, 0.25, false, counts.narrow(0, 0, 1)),
               c10::Error);  // one count for two batches
  EXPECT_THROW(
      kernels::block_attention(q, k, v, 0.25, false, at::tensor({int64_t{71}, int64_t{1}})),
      c10::Error);  // more keys than there are
  EXPECT_THROW(kernels::block_attention(q, k, v, 0.25, false, counts.to(at::kInt)),
               c10::Error);                                                  // not int64
  EXPECT_FALSE(kernels::block_attention_applies(q, k, v.narrow(2, 0, 69)));  // k, v differ
  EXPECT_FALSE(kernels::block_attention_applies(q, k.narrow(1, 0, 2), v.narrow(1, 0, 2)));
  EXPECT_FALSE(kernels::block_attention_applies(q.transpose(2, 3), k, v));  // dim strided
  EXPECT_FALSE(kernels::block_attention_applies(q.to(at::kDouble), k, v));  // fp64
  const at::Tensor wide = at::randn({1, 1, 4, kernels::kMaxBlockAttentionDim + 1});
  EXPECT_FALSE(kernels::block_attention_applies(wide, wide, wide));  // head past the limit
  EXPECT_THROW(kernels::block_attention(q, k, v.narrow(1, 0, 3), 0.25, false), c10::Error);
}

TEST(KernelEntryPoints, CachedAttentionMatchesSdpaAndRefusesWhatItCannotServe) {
  at::manual_seed(4);
  const at::Tensor q = at::randn({2, 6, 1, 16}), k = at::randn({2, 2, 40, 16}),
                   v = at::randn({2, 2, 40, 16});
  // A padding mask as attention_mask() makes it: [batch, 1, 1, keys], expanded over nothing.
  at::Tensor mask = at::ones({2, 1, 1, 40}, at::kBool);
  mask.select(0, 0).narrow(-1, 0, 5).fill_(false);
  const at::Tensor full_k = k.repeat_interleave(3, 1), full_v = v.repeat_interleave(3, 1);
  for (const bool masked : {false, true}) {
    const at::Tensor m = masked ? mask : at::Tensor();
    const at::Tensor out = kernels::cached_attention(q, k, v, m, 0.25);
    EXPECT_EQ(out.sizes(), (at::IntArrayRef{2, 1, 6 * 16}));
    const at::Tensor want = at::scaled_dot_product_attention(
        q, full_k, full_v, masked ? std::optional<at::Tensor>(mask) : std::nullopt, 0.0, false,
        0.25);
    EXPECT_TRUE(at::allclose(out, want.transpose(1, 2).reshape({2, 1, -1}), 1e-5, 1e-6));
  }
  // A causal prompt without a mask (its queries the cache's last positions) as SDPA's is_causal.
  const at::Tensor prompt = at::randn({2, 6, 5, 16});
  const at::Tensor last_k = full_k.narrow(2, 35, 5), last_v = full_v.narrow(2, 35, 5);
  EXPECT_TRUE(at::allclose(
      kernels::cached_attention(prompt, k.narrow(2, 35, 5), v.narrow(2, 35, 5), {}, 0.25, true),
      at::scaled_dot_product_attention(prompt, last_k, last_v, {}, 0.0, true, 0.25)
          .transpose(1, 2)
          .reshape({2, 5, -1}),
      1e-5, 1e-6));
  EXPECT_FALSE(kernels::cached_attention_applies(q, k.narrow(1, 0, 1).expand({2, 4, 40, 16}), v,
                                                 {}));  // 6 heads over 4 KV heads
  EXPECT_FALSE(kernels::cached_attention_applies(q, k, v.narrow(2, 0, 39), {}));  // lengths differ
  EXPECT_FALSE(kernels::cached_attention_applies(q.transpose(2, 3), k, v, {}));   // dim strided
  EXPECT_FALSE(kernels::cached_attention_applies(q, k, v, mask.to(at::kFloat)));  // additive mask
  EXPECT_FALSE(kernels::cached_attention_applies(q, k, v, at::ones({2, 6, 1, 40}, at::kBool)));
  EXPECT_THROW(kernels::cached_attention(q.to(at::kDouble), k, v, {}, 0.25), c10::Error);
}

TEST(KernelEntryPoints, RotaryKeepsTheLayoutAndRefusesWhatItCannotServe) {
  const at::Tensor x = at::randn({2, 3, 4, 8}), cos = at::randn({2, 3, 6}),
                   sin = at::randn({2, 3, 6});
  const at::Tensor y = kernels::rotary(x, cos, sin);
  EXPECT_EQ(y.sizes(), x.sizes());
  const at::Tensor r = x.narrow(-1, 0, 6);
  const at::Tensor want = r * cos.unsqueeze(2) +
                          at::cat({-r.narrow(-1, 3, 3), r.narrow(-1, 0, 3)}, -1) * sin.unsqueeze(2);
  EXPECT_TRUE(at::allclose(y.narrow(-1, 0, 6), want, 1e-5, 1e-6));
  EXPECT_THROW(kernels::rotary(x, at::randn({2, 3, 5}), at::randn({2, 3, 5})), c10::Error);  // odd
  EXPECT_THROW(kernels::rotary(x, at::randn({1, 3, 6}), at::randn({1, 3, 6})),
               c10::Error);                                                // batch
  EXPECT_THROW(kernels::rotary(x.transpose(1, 2), cos, sin), c10::Error);  // strided
}

TEST(KernelEntryPoints, SumTermsKeepsTheShapeAndRefusesWhatItCannotServe) {
  const at::Tensor a = at::randn({2, 3, 4}), b = at::randn({2, 3, 4}), bias = at::randn({4});
  const at::Tensor out = at::empty({2, 3, 4});
  kernels::sum_terms({a, b}, bias, out);
  EXPECT_TRUE(at::equal(out, a + b + bias));
  EXPECT_THROW(kernels::sum_terms({a}, {}, out), c10::Error);                     // one term
  EXPECT_THROW(kernels::sum_terms({a, b.narrow(2, 0, 3)}, {}, out), c10::Error);  // shape
  EXPECT_THROW(kernels::sum_terms({a, b.transpose(0, 1)}, {}, out), c10::Error);  // strided
  EXPECT_THROW(kernels::sum_terms({a, b}, at::randn({3}), out), c10::Error);      // bias
  EXPECT_THROW(kernels::sum_terms({a, b.to(at::kDouble)}, {}, out), c10::Error);  // dtype
}

TEST(KernelEntryPoints, SumAddNormRefusesWhatItCannotServe) {
  using kernels::NormKind;
  constexpr NormKind kLN = NormKind::kLayerNorm;
  const at::Tensor a = at::randn({2, 3, 4}), r = at::randn({2, 3, 4}), v = at::randn({4});
  const at::Tensor sum = at::empty({2, 3, 4}), y = at::empty({2, 3, 4});
  kernels::sum_add_norm({a}, v, r, kLN, {}, {}, 1e-5, sum, {});
  EXPECT_TRUE(at::equal(sum, r + (a + v)));
  kernels::sum_add_norm({a}, {}, r, NormKind::kRMSNorm, v, {}, 1e-6, sum, y);
  EXPECT_TRUE(at::equal(y, kernels::rms_norm(r + a, v, 1e-6)));
  EXPECT_THROW(kernels::sum_add_norm({}, {}, r, kLN, v, {}, 1e-5, sum, y), c10::Error);  // none
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r.narrow(2, 0, 3), kLN, v, {}, 1e-5, sum, y),
               c10::Error);  // the residual's shape
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r, kLN, {}, {}, 1e-5, sum, y),
               c10::Error);  // an output y without a norm
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r, kLN, v, {}, 1e-5, sum, {}),
               c10::Error);  // a norm without its output
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r, kLN, {}, v, 1e-5, sum, {}),
               c10::Error);  // a norm bias without its weight
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r, NormKind::kRMSNorm, v, v, 1e-5, sum, y),
               c10::Error);  // an RMSNorm with a bias
  EXPECT_THROW(kernels::sum_add_norm({a}, {}, r, kLN, v, {}, 1e-5, sum, y.transpose(0, 1)),
               c10::Error);  // strided y
}

TEST(KernelEntryPoints, SoftmaxCrossEntropyRefusesTargetsPastTheColumns) {
  const at::Tensor x = at::randn({2, 5});
  const auto [max, sum] = kernels::softmax_stats(x);
  const at::Tensor scale = at::ones({2});
  EXPECT_NO_THROW(kernels::softmax_cross_entropy_grad(x, max, sum, at::tensor({4L, -1L}), scale));
  EXPECT_THROW(kernels::softmax_cross_entropy_grad(x, max, sum, at::tensor({5L, 0L}), scale),
               c10::Error);
  EXPECT_FALSE(kernels::softmax_cross_entropy_applies(at::randn({2, 5}).t()));
  EXPECT_FALSE(kernels::softmax_cross_entropy_applies(at::randn({2, 5, 3})));
}

TEST(KernelEntryPoints, CapabilityIsOneOfTheCompiledSets) {
  const std::string cap = kernels::capability();
  EXPECT_TRUE(cap == "AVX512" || cap == "AVX2" || cap == "DEFAULT") << cap;
}

}  // namespace

// Kernel timing: nothing is recorded while it is off; on, each call adds to its kernel-and-shape
// entry (a transposed A named apart), and a reset empties the table.
TEST(KernelTiming, RecordsEachCallByKernelAndShapeOnlyWhileOn) {
  kernels::reset_kernel_times();
  const at::Tensor a = at::randn({5, 7}), b = at::randn({7, 3});
  at::Tensor out = at::empty({5, 3});
  kernels::gemm(a, b, {}, false, out);
  EXPECT_TRUE(kernels::kernel_times().empty());

  kernels::set_kernel_timing(true);
  kernels::gemm(a, b, {}, false, out);
  kernels::gemm(a, b, {}, true, out);
  kernels::gemm(at::randn({7, 5}).t(), b, {}, false, out);
  kernels::bias_gelu_tanh(at::randn({4, 6}), {});
  kernels::set_kernel_timing(false);
  kernels::gemm(a, b, {}, false, out);

  const std::vector<kernels::KernelTime> times = kernels::kernel_times();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].call, "bias_gelu_tanh rows=4 cols=6");
  EXPECT_EQ(times[0].calls, 1);
  EXPECT_EQ(times[1].call, "gemm m=5 k=7 n=3");
  EXPECT_EQ(times[1].calls, 2);
  EXPECT_EQ(times[2].call, "gemm_a_transposed m=5 k=7 n=3");
  EXPECT_EQ(times[2].calls, 1);
  for (const kernels::KernelTime& t : times) EXPECT_GT(t.seconds, 0.0) << t.call;

  kernels::reset_kernel_times();
  EXPECT_TRUE(kernels::kernel_times().empty());
}
