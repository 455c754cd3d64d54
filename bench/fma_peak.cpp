// The fp32 FMA peak probe (fma_peak.h): twelve independent FMA chains per thread, more than the
// FMA units' latency x throughput, so the units never wait; each function compiled for its ISA.
#include "fma_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr int kChains = 12;
constexpr int64_t kSteps = 20'000'000;  // per chain: about 0.1 s at AVX-512 rates

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"))) float chains_avx512() {
  __m512 acc[kChains];
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  }
  float sum = 0;
  for (int i = 0; i < kChains; ++i) sum += _mm512_reduce_add_ps(acc[i]);
  return sum;
}

__attribute__((target("avx2,fma"))) float chains_avx2() {
  __m256 acc[kChains];
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  }
  alignas(32) float lanes[8];
  float sum = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm256_store_ps(lanes, acc[i]);
    for (float v : lanes) sum += v;
  }
  return sum;
}
#endif

float chains_scalar() {
  float acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = static_cast<float>(i);
  for (int64_t s = 0; s < kSteps; ++s) {
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  }
  float sum = 0;
  for (float v : acc) sum += v;
  return sum;
}

struct Probe {
  const char* isa;
  int lanes;
  float (*run)();
};

Probe probe() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"AVX-512", 16, chains_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"AVX2", 8, chains_avx2};
  }
#endif
  return {"scalar", 1, chains_scalar};
}

}  // namespace

const char* fma_peak_isa() { return probe().isa; }

double fma_peak_gflops(int threads) {
  const Probe p = probe();
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> workers;
    std::vector<float> sink(threads);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { sink[t] = p.run(); });
    for (std::thread& w : workers) w.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * kChains * p.lanes * static_cast<double>(kSteps) * threads;
    if (sink[0] != -1.f) best = std::max(best, flops / seconds / 1e9);  // keeps the chains live
  }
  return best;
}
