// The fused CPU kernels against ATen references computed in fp64, for every instruction set
// this CPU runs (DEFAULT, AVX2, AVX-512), over shapes with and without vector tails.
#include "kernel_table.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace shardformer;

namespace {

struct Isa {
  std::string name;
  const kernels::KernelTable* table;
};

std::vector<Isa> runnable_tables() {
  std::vector<Isa> isas{{"DEFAULT", &kernels::DEFAULT::table}};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isas.push_back({"AVX2", &kernels::AVX2::table});
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    isas.push_back({"AVX512", &kernels::AVX512::table});
  }
#endif
  return isas;
}

// max |got - want| / (scale + floor) over all elements; scale is the reference's own size.
double worst(const at::Tensor& got, const at::Tensor& want, const at::Tensor& scale, double floor) {
  return ((got.to(at::kDouble) - want).abs() / (scale + floor)).max().item<double>();
}

class Kernels : public ::testing::TestWithParam<Isa> {};

TEST_P(Kernels, SkinnyLinearMatchesFp64Product) {
  const kernels::KernelTable& t = *GetParam().table;
  at::manual_seed(0);
  const int threads = at::get_num_threads();
  // The products split their weight across ATen's threads: 3 threads cut k = 200 unevenly.
  for (const int use_threads : {1, 3}) {
    at::set_num_threads(use_threads);
    for (const int64_t m : {1, 2, 3, 4, 5, 8, 13, 16}) {
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

INSTANTIATE_TEST_SUITE_P(Isas, Kernels, ::testing::ValuesIn(runnable_tables()),
                         [](const auto& info) { return info.param.name; });

// The tensor entry points: shapes, layouts and refusals.
TEST(KernelEntryPoints, SkinnyLinearKeepsLeadingDimsAndRefusesWhatItCannotServe) {
  const at::Tensor x = at::randn({2, 3, 8}), w = at::randn({5, 8}), b = at::randn({5});
  const at::Tensor y = kernels::skinny_linear(x, w, b, /*k_major=*/false);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_TRUE(at::allclose(y, at::linear(x, w, b), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(kernels::skinny_linear(x, w.t().contiguous(), b, /*k_major=*/true), y,
                           1e-5, 1e-6));
  EXPECT_FALSE(kernels::skinny_linear_applies(at::randn({17, 8}), w));  // too many rows
  EXPECT_FALSE(kernels::skinny_linear_applies(x, w.t()));               // strided
  EXPECT_FALSE(kernels::skinny_linear_applies(x.to(at::kDouble), w));   // fp64
  EXPECT_THROW(kernels::skinny_linear(x, at::randn({5, 9}), b, false), c10::Error);  // k differs
  EXPECT_THROW(kernels::skinny_linear(x, w, at::randn({4}), false), c10::Error);     // bias size
}

TEST(KernelEntryPoints, CapabilityIsOneOfTheCompiledSets) {
  const std::string cap = kernels::capability();
  EXPECT_TRUE(cap == "AVX512" || cap == "AVX2" || cap == "DEFAULT") << cap;
}

}  // namespace
