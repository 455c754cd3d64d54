// The skinny products' read-way choice (skinny_prefetch.h), as the per-instruction-set kernels
// ask for it: run a product one way, and while the choice is measured, time it.
#pragma once

#include <chrono>
#include <cstdint>
#include <type_traits>

namespace shardformer::kernels {

// How a product of `rows` rows (1 .. 8) reads its weights: one sequential stream left to the
// hardware prefetchers (kOff), the same stream with a software prefetch 8 KiB ahead (kOn), or
// each thread's rows cut into a few runs read side by side (kStreams: several streams for the
// hardware prefetchers; nn.Linear weights only).
enum class ReadWay : int { kOff = 0, kOn = 1, kStreams = 2 };

// Whether a product can take the way at all (kStreams: not the Conv1D layout).
bool way_offered(ReadWay way, int rows, bool k_major);

// The way for a product reading `bytes` of weights once, and whether to time it (a try while the
// choice is measured).
struct ReadChoice {
  ReadWay way;
  bool timed;
};
ReadChoice read_way(int rows, bool k_major, int64_t bytes);
void report_read_try(int rows, bool k_major, ReadWay way, int64_t bytes, double seconds);

// Calls f(std::integral_constant<ReadWay, way>{}) for the product's way, timing the call while
// the choice is measured.
template <typename F>
void with_read_way(int rows, bool k_major, int64_t bytes, const F& f) {
  const ReadChoice choice = read_way(rows, k_major, bytes);
  const auto call = [&] {
    switch (choice.way) {
      case ReadWay::kOn: return f(std::integral_constant<ReadWay, ReadWay::kOn>{});
      case ReadWay::kOff: return f(std::integral_constant<ReadWay, ReadWay::kOff>{});
      case ReadWay::kStreams: return f(std::integral_constant<ReadWay, ReadWay::kStreams>{});
    }
  };
  if (!choice.timed) return call();
  const auto start = std::chrono::steady_clock::now();
  call();
  report_read_try(rows, k_major, choice.way, bytes,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace shardformer::kernels
