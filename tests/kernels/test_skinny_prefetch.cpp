// The few-row products' prefetch choice (kernels/cpu/prefetch_choice.h): both ways tried in turn
// on products from memory and the faster kept per row count, small products left out, the
// forced modes, and the same bits whichever way a product reads its weights.
#include "prefetch_choice.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/skinny_prefetch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

using namespace shardformer;
using kernels::PrefetchWay;
using kernels::SkinnyPrefetch;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Sets a mode for one test and puts the process's mode back after it.
class PrefetchMode {
 public:
  explicit PrefetchMode(SkinnyPrefetch mode) : before_(kernels::set_skinny_prefetch(mode)) {}
  ~PrefetchMode() { kernels::set_skinny_prefetch(before_); }
  PrefetchMode(const PrefetchMode&) = delete;
  PrefetchMode& operator=(const PrefetchMode&) = delete;

 private:
  SkinnyPrefetch before_;
};

void busy_for(std::chrono::microseconds time) {
  const auto end = std::chrono::steady_clock::now() + time;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Runs `calls` products of `bytes` through the choice for `rows` rows, the prefetching way
// taking on_us and the other off_us; counts the calls each way got.
struct Counts {
  int on = 0, off = 0;
};
Counts run_products(int rows, int64_t bytes, int calls, int on_us, int off_us) {
  Counts counts;
  for (int i = 0; i < calls; ++i) {
    kernels::with_prefetch_way(rows, false, bytes, [&](auto prefetch) {
      if constexpr (decltype(prefetch)::value) {
        ++counts.on;
        busy_for(std::chrono::microseconds(on_us));
      } else {
        ++counts.off;
        busy_for(std::chrono::microseconds(off_us));
      }
    });
  }
  return counts;
}

}  // namespace

// 256 MiB warm the weights (untimed), then each way reads 128 MiB: with 64 MiB products, the
// choice falls after the 8th, from the times of the 5th to the 8th, and holds from then on. The
// ways differ 20-fold, so that a loaded machine's preemptions (ctest -j 3 on 2 cores) cannot
// reverse them.
TEST(SkinnyPrefetch, TriesBothWaysInTurnAndKeepsTheFasterPerRowCount) {
  const PrefetchMode mode(SkinnyPrefetch::kMeasure);
  const Counts measuring = run_products(1, 64 * kMiB, 8, /*on_us=*/20000, /*off_us=*/1000);
  EXPECT_EQ(measuring.on, 4);
  EXPECT_EQ(measuring.off, 4);
  EXPECT_EQ(kernels::prefetch_way(1, false, 64 * kMiB), PrefetchWay::kOff);
  const Counts after = run_products(1, 64 * kMiB, 6, 20000, 1000);
  EXPECT_EQ(after.on, 0);
  EXPECT_EQ(after.off, 6);

  // Another row count measures for itself, here the other way round.
  EXPECT_EQ(kernels::prefetch_way(2, false, 64 * kMiB), PrefetchWay::kTryOn);
  run_products(2, 64 * kMiB, 8, /*on_us=*/1000, /*off_us=*/20000);
  EXPECT_EQ(kernels::prefetch_way(2, false, 64 * kMiB), PrefetchWay::kOn);
  EXPECT_EQ(kernels::prefetch_way(1, false, 64 * kMiB), PrefetchWay::kOff);
  // The Conv1D layout's 1-row products have not been measured.
  EXPECT_NE(kernels::prefetch_way(1, true, 64 * kMiB), PrefetchWay::kOff);

  const std::string summary = kernels::skinny_prefetch_summary();
  EXPECT_NE(summary.find("measured: 1 row off ("), std::string::npos) << summary;
  EXPECT_NE(summary.find("2 rows on ("), std::string::npos) << summary;

  // Measuring again starts afresh.
  kernels::set_skinny_prefetch(SkinnyPrefetch::kMeasure);
  EXPECT_EQ(kernels::skinny_prefetch_summary(), "measured, nothing decided yet");
}

// Products under 1 MiB (weights the caches may hold) prefetch, untimed, and decide nothing.
TEST(SkinnyPrefetch, LeavesSmallProductsOutOfTheMeasurement) {
  const PrefetchMode mode(SkinnyPrefetch::kMeasure);
  const Counts small = run_products(3, kMiB - 4, 40, /*on_us=*/100, /*off_us=*/1);
  EXPECT_EQ(small.on, 40);
  EXPECT_EQ(small.off, 0);
  EXPECT_EQ(kernels::skinny_prefetch_summary(), "measured, nothing decided yet");
}

TEST(SkinnyPrefetch, ForcedModesHoldForEveryProduct) {
  for (const auto& [forced, way, name] :
       std::vector<std::tuple<SkinnyPrefetch, PrefetchWay, std::string>>{
           {SkinnyPrefetch::kOn, PrefetchWay::kOn, "on"},
           {SkinnyPrefetch::kOff, PrefetchWay::kOff, "off"}}) {
    const PrefetchMode mode(forced);
    for (const int rows : {1, 4, 8}) {
      for (const int64_t bytes : {int64_t{0}, 512 * kMiB}) {
        EXPECT_EQ(kernels::prefetch_way(rows, rows == 4, bytes), way) << name << " " << rows;
      }
    }
    EXPECT_EQ(kernels::skinny_prefetch_summary(), name);
  }
}

// The prefetch only asks for lines early: the products' bits are the same either way, for every
// row group (1 .. 8 rows and a tail past 8) and both weight layouts.
TEST(SkinnyPrefetch, BothWaysGiveTheSameBits) {
  at::manual_seed(0);
  const int64_t k = 576, n = 1000;
  const at::Tensor w = at::randn({n, k}), w_k_major = at::randn({k, n}), bias = at::randn({n});
  const at::Tensor w_up = at::randn({n, k});
  for (const int64_t m : {1, 2, 3, 5, 8, 13}) {
    const at::Tensor x = at::randn({m, k});
    std::vector<std::vector<at::Tensor>> outputs;
    for (const SkinnyPrefetch forced : {SkinnyPrefetch::kOn, SkinnyPrefetch::kOff}) {
      const PrefetchMode mode(forced);
      std::vector<at::Tensor> out{kernels::skinny_linear(x, w, bias, false),
                                  kernels::skinny_linear(x, w_k_major, bias, true),
                                  kernels::skinny_silu_gate(x, w, bias, w_up, {})};
      for (const at::Tensor& y : kernels::skinny_products(x, {w, w_up}, {bias, {}})) {
        out.push_back(y);
      }
      outputs.push_back(out);
    }
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      EXPECT_TRUE(at::equal(outputs[0][i], outputs[1][i])) << "m " << m << " product " << i;
    }
  }
}
