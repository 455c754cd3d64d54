// The products on AMX tiles (kernels/amx_gemm.h) against fp64 ATen and ATen's fp32 product:
// shapes off the tiles' multiples of 16 and 32, both weight layouts, bias, strided rows, k past
// one pass, one and two threads; kernels::gemm's entry with any strides and accumulation.
// Skipped, saying why, where the CPU or the OS offers no AMX.
#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <tuple>
#include <utility>
#include <vector>

using namespace shardformer;

namespace {

// |got - want| against fp64, and the same for ATen's fp32 product of the operands, each relative
// to the largest |want|.
struct Errors {
  double amx, aten;
};

Errors errors(const at::Tensor& got, const at::Tensor& x, const at::Tensor& w, bool k_major,
              const at::Tensor& bias) {
  const at::Tensor wt = k_major ? w : w.t();  // [k, n]
  at::Tensor want = at::mm(x.to(at::kDouble), wt.to(at::kDouble));
  at::Tensor fp32 = at::mm(x, wt);
  if (bias.defined()) {
    want += bias.to(at::kDouble);
    fp32 += bias;
  }
  const double scale = want.abs().max().item<double>() + 1e-30;
  return {(got.to(at::kDouble) - want).abs().max().item<double>() / scale,
          (fp32.to(at::kDouble) - want).abs().max().item<double>() / scale};
}

TEST(AmxGemm, EqualsFp32ProductsOffTheTileMultiples) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
  at::manual_seed(0);
  const int previous = at::get_num_threads();
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1},
                                                                                  {33, 40, 70},
                                                                                  {64, 64, 64},
                                                                                  {100, 768, 300},
                                                                                  {257, 1100, 47},
                                                                                  {40, 3, 2000}}) {
    for (const bool k_major : {false, true}) {
      for (const bool with_bias : {false, true}) {
        for (const int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message()
                       << m << " x " << k << " x " << n << ", k_major " << k_major << ", bias "
                       << with_bias << ", threads " << threads);
          at::set_num_threads(threads);
          const at::Tensor w = k_major ? at::randn({k, n}) : at::randn({n, k});
          const at::Tensor bias = with_bias ? at::randn({n}) : at::Tensor();
          const at::Tensor x = at::randn({m, k});
          const at::Tensor packed = kernels::amx_pack_weight(w, k_major);
          const at::Tensor y = kernels::amx_linear(x, packed, n, bias);
          ASSERT_EQ(y.sizes().vec(), std::vector<int64_t>({m, n}));
          const Errors e = errors(y, x, w, k_major, bias);
          // bf16x6 drops part products below fp32's rounding: within a few times ATen's fp32
          // error, which k's sum sets (at least one rounding of the largest value).
          EXPECT_LT(e.amx, 4 * e.aten + 1.2e-7) << "ATen's fp32 error " << e.aten;
        }
      }
    }
  }
  at::set_num_threads(previous);
}

// Rows a stride apart (a column slice of a wider matrix) and values far from 1 in magnitude:
// the parts carry their own exponents.
TEST(AmxGemm, ReadsStridedRowsAndKeepsLargeAndSmallValues) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
  at::manual_seed(1);
  const at::Tensor wide = at::randn({70, 90}) * 1e4;
  const at::Tensor x = wide.narrow(1, 5, 64);  // [70, 64], rows 90 apart
  const at::Tensor w = at::randn({48, 64}) * 1e-4;
  const at::Tensor y = kernels::amx_linear(x, kernels::amx_pack_weight(w, false), 48, {});
  const Errors e = errors(y, x, w, false, {});
  EXPECT_LT(e.amx, 4 * e.aten + 1.2e-7) << "ATen's fp32 error " << e.aten;
}

TEST(AmxGemm, RefusesOperandsItCannotRead) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
  const at::Tensor packed = kernels::amx_pack_weight(at::randn({8, 16}), false);
  EXPECT_THROW(kernels::amx_linear(at::randn({4, 16}), packed, 40, {}), c10::Error);  // not [8, 16]
  EXPECT_THROW(kernels::amx_linear(at::randn({4, 16}).to(at::kDouble), packed, 8, {}), c10::Error);
  EXPECT_THROW(kernels::amx_linear(at::randn({16, 4}).t(), packed, 8, {}), c10::Error);
  EXPECT_THROW(kernels::amx_linear(at::randn({4, 16}), packed, 8, at::randn({7})), c10::Error);
  EXPECT_THROW(kernels::amx_pack_weight(at::randn({16, 8}).t(), false), c10::Error);
}

// kernels::gemm's AMX backend: a and b of any strides (b packed at each call from its rows, its
// columns or a copy), accumulation with and without a bias, a column slice of a wider output,
// k = 0.
TEST(AmxGemm, GemmTakesAnyStridesAccumulatesAndWritesSlices) {
  if (!kernels::amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
  at::manual_seed(2);
  const int64_t m = 70, k = 90, n = 50;
  const std::vector<std::pair<const char*, at::Tensor>> as = {
      {"rows", at::randn({m, k})}, {"transposed", at::randn({k, m}).t()}};
  const std::vector<std::pair<const char*, at::Tensor>> bs = {
      {"rows", at::randn({k, n})},
      {"transposed", at::randn({n, k}).t()},
      {"strided", at::randn({2 * k, 2 * n}).slice(0, 0, 2 * k, 2).slice(1, 0, 2 * n, 2)}};
  for (const auto& [a_name, a] : as) {
    for (const auto& [b_name, b] : bs) {
      for (const bool accumulate : {false, true}) {
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "a " << a_name << ", b " << b_name << ", accumulate "
                                            << accumulate << ", bias " << with_bias);
          const at::Tensor bias = with_bias ? at::randn({n}) : at::Tensor();
          const at::Tensor wide = at::randn({m, n + 9});  // out: columns 4 .. n + 4
          const at::Tensor before = wide.clone();
          kernels::amx_gemm(a, b, bias, accumulate, wide.narrow(1, 4, n));
          at::Tensor want = at::mm(a.to(at::kDouble), b.to(at::kDouble));
          if (with_bias) want += bias.to(at::kDouble);
          if (accumulate) want += before.narrow(1, 4, n).to(at::kDouble);
          const double scale = want.abs().max().item<double>();
          EXPECT_LT((wide.narrow(1, 4, n).to(at::kDouble) - want).abs().max().item<double>(),
                    1e-6 * scale);
          EXPECT_TRUE(at::equal(wide.narrow(1, 0, 4), before.narrow(1, 0, 4)));
          EXPECT_TRUE(at::equal(wide.narrow(1, n + 4, 5), before.narrow(1, n + 4, 5)));
        }
      }
    }
  }
  // k = 0: the bias alone, or out left as it is plus the bias.
  const at::Tensor bias = at::randn({n}), out = at::randn({m, n}), kept = out.clone();
  kernels::amx_gemm(at::randn({m, 0}), at::randn({0, n}), bias, true, out);
  EXPECT_TRUE(at::allclose(out, kept + bias));
  kernels::amx_gemm(at::randn({m, 0}), at::randn({0, n}), {}, false, out);
  EXPECT_TRUE(at::equal(out, at::zeros({m, n})));
}

TEST(AmxGemm, TheBackendIsRefusedWhereTheTilesAreMissing) {
  if (kernels::amx_available()) {
    const kernels::GemmBackend before = kernels::set_gemm_backend(kernels::GemmBackend::kAmx);
    EXPECT_EQ(kernels::gemm_name().rfind("AMX tiles (bf16x6)", 0), 0U) << kernels::gemm_name();
    kernels::set_gemm_backend(before);
  } else {
    EXPECT_THROW(kernels::set_gemm_backend(kernels::GemmBackend::kAmx), c10::Error);
    EXPECT_THROW(kernels::amx_pack_weight(at::randn({8, 16}), false), c10::Error);
  }
}

}  // namespace
