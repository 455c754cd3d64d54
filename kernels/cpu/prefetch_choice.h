// The skinny products' prefetch choice (skinny_prefetch.h), as the per-instruction-set kernels
// ask for it: run a product with or without the prefetch, and while measuring, time it.
#pragma once

#include <chrono>
#include <cstdint>
#include <type_traits>

namespace shardformer::kernels {

// How one product of `rows` rows (1 .. 8) reads its weights (nn.Linear [n, k] or, k_major,
// Conv1D [k, n]): decided, or to be timed as a try of one way while the choice is measured.
enum class PrefetchWay { kOn, kOff, kTryOn, kTryOff };
PrefetchWay prefetch_way(int rows, bool k_major, int64_t bytes);
void report_prefetch_try(int rows, bool k_major, bool on, int64_t bytes, double seconds);

// Calls f(std::true_type{}) (prefetch) or f(std::false_type{}) for a product reading `bytes` of
// weights once, timing the call while the choice is measured.
template <typename F>
void with_prefetch_way(int rows, bool k_major, int64_t bytes, const F& f) {
  const PrefetchWay way = prefetch_way(rows, k_major, bytes);
  if (way == PrefetchWay::kOn) return f(std::true_type{});
  if (way == PrefetchWay::kOff) return f(std::false_type{});
  const bool on = way == PrefetchWay::kTryOn;
  const auto start = std::chrono::steady_clock::now();
  if (on) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
  report_prefetch_try(
      rows, k_major, on, bytes,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace shardformer::kernels
