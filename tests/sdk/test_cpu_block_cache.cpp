// The large-block CPU cache: freed blocks are reused, a miss gives back at least its own size
// first (the mapped total stays at what the requests alone would map), small requests and
// c10's raw allocations still work, and values are what was written.
#include "shardformer/runtime/cpu_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

namespace shardformer {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(CpuBlockCache, ReusesFreedBlocksAndNeverMapsMoreThanTheRequestsNeed) {
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
    const at::Tensor b = at::empty({4 * kMiB / 4});  // the same size: the same block
    EXPECT_EQ(b.data_ptr(), first);
  }
  runtime::BlockCacheStats now = runtime::cpu_block_cache_stats();
  EXPECT_EQ(now.hits - start.hits, 1);
  EXPECT_EQ(now.cached_bytes, 4 * kMiB);
  {
    // 8 MiB fits no kept block: the 4 MiB one is given back before mapping.
    const at::Tensor c = at::zeros({8 * kMiB / 4});
    now = runtime::cpu_block_cache_stats();
    EXPECT_EQ(now.cached_bytes, 0);
    EXPECT_EQ(now.mapped_bytes, 8 * kMiB);
    EXPECT_EQ(c.sum().item<double>(), 0.0);
  }
  EXPECT_GE(runtime::cpu_block_cache_stats().evictions - start.evictions, 1);
  runtime::release_cpu_block_cache();
  EXPECT_EQ(runtime::cpu_block_cache_stats().mapped_bytes, 0);
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
