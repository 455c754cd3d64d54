// The fp32 FMA peak probe (fma_peak.h): twelve independent FMA chains per thread, more than the
// FMA units' latency x throughput, so the units never wait; each function compiled for its ISA.
#include "fma_peak.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <set>
#include <thread>
#include <utility>
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

// One CPU per core this process may run on (SMT siblings left out), in CPU order: the probe's
// threads each take one, so that no two share a core.
std::vector<int> one_cpu_per_core() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  std::set<std::pair<int, int>> cores;  // (package, core)
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = cpu;  // without sysfs every CPU counts as a core of its own
    std::ifstream(topology + "physical_package_id") >> package;
    std::ifstream(topology + "core_id") >> core;
    if (cores.insert({package, core}).second) cpus.push_back(cpu);
  }
  return cpus;
}

void pin_to(std::thread& thread, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(thread.native_handle(), sizeof(one), &one);
}

// This thread's CPU time: the cores' rate while they run, without the time a VM's CPU spends
// descheduled by its host (unpinned wall-clock rounds on a 2-core Zen 3 VM read half the peak in
// about one of eight runs; pinned, still one in eight).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

const char* fma_peak_isa() { return probe().isa; }

double fma_peak_gflops(int threads) {
  const Probe p = probe();
  const std::vector<int> cpus = one_cpu_per_core();
  const double flops_per_thread = 2.0 * kChains * p.lanes * static_cast<double>(kSteps);
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> workers;
    std::vector<float> sink(threads);
    std::vector<double> gflops(threads);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const double cpu_start = thread_cpu_seconds();
        sink[t] = p.run();
        gflops[t] = flops_per_thread / (thread_cpu_seconds() - cpu_start) / 1e9;
      });
      // More threads than cores: the rest float.
      if (static_cast<size_t>(t) < cpus.size()) pin_to(workers.back(), cpus[t]);
    }
    for (std::thread& w : workers) w.join();
    double sum = 0;
    for (double g : gflops) sum += g;
    if (sink[0] != -1.f) best = std::max(best, sum);  // keeps the chains live
  }
  return best;
}
