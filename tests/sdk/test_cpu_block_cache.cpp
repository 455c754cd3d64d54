// The large-block CPU cache: freed blocks are reused, a miss evicts the least recently freed
// blocks only while the mapped total would pass twice the peak in use, a large block and the
// smaller ones it alternates with stay mapped together, a cycle through more sizes than that
// keeps raises the limit until it fits, small requests and c10's raw allocations still work,
// and values are what was written.
#include "shardformer/runtime/cpu_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

namespace shardformer {
namespace {

constexpr int64_t kMiB = 1 << 20;

at::Tensor mib(int64_t n) { return at::empty({n * kMiB / 4}); }  // n MiB of fp32

TEST(CpuBlockCache, ReusesFreedBlocks) {
  runtime::install_cpu_block_cache();
  runtime::release_cpu_block_cache();
  const runtime::BlockCacheStats start = runtime::cpu_block_cache_stats();
  void* first = nullptr;
  {
    at::Tensor a = at::full({4 * kMiB / 4}, 1.5f);  // 4 MiB
    first = a.data_ptr();
    EXPECT_EQ(a.sum().item<double>(), 1.5 * kMiB);
  }
  {
    const at::Tensor b = mib(4);  // the same size: the same block
    EXPECT_EQ(b.data_ptr(), first);
  }
  const runtime::BlockCacheStats now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.hits - start.hits, 1);
  EXPECT_EQ(now.misses - start.misses, 1);
  EXPECT_EQ(now.cached_bytes, 4 * kMiB);
  {
    const at::Tensor c = at::zeros({8 * kMiB / 4});  // fits no kept block: a new mapping
    EXPECT_EQ(c.sum().item<double>(), 0.0);
  }
  runtime::release_cpu_block_cache();
  EXPECT_EQ(runtime::cpu_block_cache_stats().mapped_bytes, 0);
}

TEST(CpuBlockCache, EvictsLeastRecentlyFreedPastTwiceThePeakInUse) {
  runtime::install_cpu_block_cache();
  runtime::release_cpu_block_cache();
  const runtime::BlockCacheStats start = runtime::cpu_block_cache_stats();
  // One at a time, each fitting no kept block: peak 4, 5, then 6 MiB in use.
  for (const int64_t n : {4, 5}) mib(n);
  runtime::BlockCacheStats now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.evictions - start.evictions, 0);  // 4 + 5 MiB within 2 x 5
  EXPECT_EQ(now.mapped_bytes, 9 * kMiB);
  mib(6);  // 9 + 6 MiB passes 2 x 6: the 4 MiB block, freed first, goes
  now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.evictions - start.evictions, 1);
  EXPECT_EQ(now.mapped_bytes, 11 * kMiB);
  EXPECT_EQ(now.cached_bytes, 11 * kMiB);
  EXPECT_EQ(mib(5).data_ptr() != nullptr, true);  // the 5 MiB block stayed: a hit
  EXPECT_EQ(runtime::cpu_block_cache_stats().hits - start.hits, 1);
  runtime::release_cpu_block_cache();
}

// A forward's pattern: the layers' activations (two 4 MiB blocks in use at once), then the
// logits (16 MiB) alone, again and again. Under a bound of one peak in use each phase evicted
// the other's blocks and every round mapped fresh pages; now only the first round misses.
TEST(CpuBlockCache, ALargeBlockAndTheSmallerOnesItAlternatesWithStayMapped) {
  runtime::install_cpu_block_cache();
  runtime::release_cpu_block_cache();
  const runtime::BlockCacheStats start = runtime::cpu_block_cache_stats();
  for (int round = 0; round < 4; ++round) {
    { const at::Tensor a = mib(4), b = mib(4); }
    const at::Tensor logits = mib(16);
  }
  const runtime::BlockCacheStats now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.misses - start.misses, 3);
  EXPECT_EQ(now.hits - start.hits, 9);
  EXPECT_EQ(now.evictions - start.evictions, 0);
  EXPECT_EQ(now.mapped_bytes, 24 * kMiB);  // within 2 x 16 MiB
  runtime::release_cpu_block_cache();
}

// The sequence-parallel forward's pattern in small: four blocks of one size in use at once (a
// peak of 12 MiB), then three other sizes one at a time, 33 MiB of blocks in all. Twice the
// peak (24 MiB) evicted in every round the blocks the next round asked for first; each miss of
// an evicted size raises the limit by half the peak, and from the third round nothing misses.
TEST(CpuBlockCache, ACycleThroughMoreSizesThanTheLimitKeepsRaisesIt) {
  runtime::install_cpu_block_cache();
  runtime::release_cpu_block_cache();
  const runtime::BlockCacheStats start = runtime::cpu_block_cache_stats();
  EXPECT_EQ(start.limit, 2.0);
  const auto round = [] {
    { const at::Tensor a = mib(3), b = mib(3), c = mib(3), d = mib(3); }
    for (const int64_t n : {5, 7, 9}) mib(n);
  };
  round();
  round();
  const runtime::BlockCacheStats settled = runtime::cpu_block_cache_stats();
  EXPECT_EQ(settled.refaults - start.refaults, 2);  // a 3 MiB block in round 2, then the 5 MiB
  EXPECT_EQ(settled.limit, 3.0);
  for (int i = 0; i < 4; ++i) round();
  const runtime::BlockCacheStats now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.misses, settled.misses);
  EXPECT_EQ(now.evictions, settled.evictions);
  EXPECT_EQ(now.mapped_bytes, 33 * kMiB);  // within 3 x 12 MiB
  runtime::release_cpu_block_cache();
  EXPECT_EQ(runtime::cpu_block_cache_stats().limit, 2.0);  // a new phase starts at twice again
}

TEST(CpuBlockCache, SmallAndRawAllocationsStillWork) {
  runtime::install_cpu_block_cache();
  const at::Tensor small = at::arange(100, at::kFloat);  // below the 1 MiB threshold
  EXPECT_EQ(small.sum().item<double>(), 4950.0);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (const size_t bytes : {size_t{64}, size_t{3 * kMiB}}) {  // c10's raw interface
    void* p = allocator->raw_allocate(bytes);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[bytes - 1] = 1;
    allocator->raw_deallocate(p);
  }
}

}  // namespace
}  // namespace shardformer
