// The few-row products' read-way choice (kernels/cpu/prefetch_choice.h): the ways tried in turn
// on products from memory and the fastest kept per row count, small products left out, the
// forced modes, and the same bits whichever way a product reads its weights.
#include "prefetch_choice.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/skinny_prefetch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

using namespace shardformer;
using kernels::ReadWay;
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

// Runs `calls` products of `bytes` through the choice for `rows` rows (nn.Linear weights), each
// way taking its time from `us` (by ReadWay); counts the calls each way got.
using Counts = std::array<int, 3>;  // by ReadWay
Counts run_products(int rows, int64_t bytes, int calls, const std::array<int, 3>& us,
                    bool k_major = false) {
  Counts counts{};
  for (int i = 0; i < calls; ++i) {
    kernels::with_read_way(rows, k_major, bytes, [&](auto way) {
      const auto w = static_cast<size_t>(decltype(way)::value);
      ++counts[w];
      busy_for(std::chrono::microseconds(us[w]));
    });
  }
  return counts;
}

ReadWay way_of(int rows, bool k_major, int64_t bytes) {
  return kernels::read_way(rows, k_major, bytes).way;
}

}  // namespace

// 256 MiB warm the weights (untimed), then each way reads 128 MiB: with 64 MiB products and the
// three ways of a 1-row product, the choice falls after the 10th, from the times of the 5th to
// the 10th, and holds from then on. The ways differ 20-fold, so that a loaded machine's
// preemptions (ctest -j 3 on 2 cores) cannot reverse them. Order (by ReadWay): off, on, streams.
TEST(SkinnyPrefetch, TriesTheWaysInTurnAndKeepsTheFastestPerRowCount) {
  const PrefetchMode mode(SkinnyPrefetch::kMeasure);
  const Counts measuring = run_products(1, 64 * kMiB, 10, {1000, 20000, 20000});
  EXPECT_EQ(measuring, (Counts{3, 4, 3}));  // the prefetch first
  EXPECT_EQ(way_of(1, false, 64 * kMiB), ReadWay::kOff);
  EXPECT_EQ(run_products(1, 64 * kMiB, 6, {1000, 20000, 20000}), (Counts{6, 0, 0}));

  // Another row count measures for itself, here with the streams fastest.
  EXPECT_TRUE(kernels::read_way(2, false, 64 * kMiB).timed);
  run_products(2, 64 * kMiB, 10, {20000, 20000, 1000});
  EXPECT_EQ(way_of(2, false, 64 * kMiB), ReadWay::kStreams);
  EXPECT_EQ(way_of(1, false, 64 * kMiB), ReadWay::kOff);
  // The Conv1D layout's 1-row products have not been measured.
  EXPECT_TRUE(kernels::read_way(1, true, 64 * kMiB).timed);

  const std::string summary = kernels::skinny_prefetch_summary();
  EXPECT_NE(summary.find("measured: 1 row off ("), std::string::npos) << summary;
  EXPECT_NE(summary.find("GB/s; on "), std::string::npos) << summary;
  EXPECT_NE(summary.find(", streams "), std::string::npos) << summary;
  EXPECT_NE(summary.find("2 rows streams ("), std::string::npos) << summary;

  // Measuring again starts afresh.
  kernels::set_skinny_prefetch(SkinnyPrefetch::kMeasure);
  EXPECT_EQ(kernels::skinny_prefetch_summary(), "measured, nothing decided yet");
}

// Conv1D weights (GPT-2's) cannot stream: their products take the two other ways in turn.
TEST(SkinnyPrefetch, ProductsThatCannotStreamTryTwoWays) {
  const PrefetchMode mode(SkinnyPrefetch::kMeasure);
  EXPECT_FALSE(kernels::way_offered(ReadWay::kStreams, 1, true));
  for (const int rows : {1, 8}) EXPECT_TRUE(kernels::way_offered(ReadWay::kStreams, rows, false));
  const Counts measuring = run_products(8, 64 * kMiB, 8, {20000, 1000, 1000}, /*k_major=*/true);
  EXPECT_EQ(measuring, (Counts{4, 4, 0}));
  EXPECT_EQ(way_of(8, true, 64 * kMiB), ReadWay::kOn);
  const std::string summary = kernels::skinny_prefetch_summary();
  EXPECT_NE(summary.find("8 rows (Conv1D) on ("), std::string::npos) << summary;
  EXPECT_EQ(summary.find("streams"), std::string::npos) << summary;
}

// Products under 1 MiB (weights the caches may hold) prefetch, untimed, and decide nothing.
TEST(SkinnyPrefetch, LeavesSmallProductsOutOfTheMeasurement) {
  const PrefetchMode mode(SkinnyPrefetch::kMeasure);
  EXPECT_EQ(run_products(3, kMiB - 4, 40, {1, 100, 1}), (Counts{0, 40, 0}));
  EXPECT_EQ(kernels::skinny_prefetch_summary(), "measured, nothing decided yet");
}

// A forced way holds for every product; streams, where a product cannot stream, read as off.
TEST(SkinnyPrefetch, ForcedModesHoldForEveryProduct) {
  for (const auto& [forced, way, name] :
       std::vector<std::tuple<SkinnyPrefetch, ReadWay, std::string>>{
           {SkinnyPrefetch::kOn, ReadWay::kOn, "on"},
           {SkinnyPrefetch::kOff, ReadWay::kOff, "off"},
           {SkinnyPrefetch::kStreams, ReadWay::kStreams, "streams"}}) {
    const PrefetchMode mode(forced);
    for (const int rows : {1, 4, 8}) {
      for (const int64_t bytes : {int64_t{0}, 512 * kMiB}) {
        const bool k_major = rows == 4;  // Conv1D: cannot stream
        const ReadWay expected = kernels::way_offered(way, rows, k_major) ? way : ReadWay::kOff;
        EXPECT_EQ(way_of(rows, k_major, bytes), expected) << name << " " << rows;
        EXPECT_FALSE(kernels::read_way(rows, k_major, bytes).timed);
      }
    }
    EXPECT_EQ(kernels::skinny_prefetch_summary(), name);
  }
}

// The prefetch only asks for lines early, and the streams sum each output as one stream does:
// the products' bits are the same every way, for every row group (1 .. 8 rows and a tail past
// 8), both weight layouts, and thread blocks whose rows do not divide into the streams.
TEST(SkinnyPrefetch, EveryWayGivesTheSameBits) {
  at::manual_seed(0);
  const int64_t n = 1000;
  for (const int64_t k : {int64_t{576}, int64_t{203}}) {  // 203: a tail past the vectors
    const at::Tensor w = at::randn({n, k}), w_k_major = at::randn({k, n}), bias = at::randn({n});
    // w_other: a second weight of another size, so that a thread's rows cross from one weight
    // into the next within a stream.
    const at::Tensor w_up = at::randn({n, k}), w_other = at::randn({700, k});
    for (const int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 13}) {
      const at::Tensor x = at::randn({m, k});
      std::vector<std::vector<at::Tensor>> outputs;
      for (const SkinnyPrefetch forced :
           {SkinnyPrefetch::kOn, SkinnyPrefetch::kOff, SkinnyPrefetch::kStreams}) {
        const PrefetchMode mode(forced);
        std::vector<at::Tensor> out{kernels::skinny_linear(x, w, bias, false),
                                    kernels::skinny_linear(x, w_k_major, bias, true),
                                    kernels::skinny_silu_gate(x, w, bias, w_up, {})};
        for (const at::Tensor& y : kernels::skinny_products(x, {w, w_other}, {bias, {}})) {
          out.push_back(y);
        }
        outputs.push_back(out);
      }
      for (size_t way = 1; way < outputs.size(); ++way) {
        for (size_t i = 0; i < outputs[0].size(); ++i) {
          EXPECT_TRUE(at::equal(outputs[0][i], outputs[way][i]))
              << "k " << k << " m " << m << " way " << way << " product " << i;
        }
      }
    }
  }
}
