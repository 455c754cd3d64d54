// Wall time of the CPU kernels per call site (the kernel and its shape), for finding where a
// forward's time goes (bench/speed --kernel-times, docs/benchmarks.md). Off by default, when a
// kernel call pays one relaxed atomic load for it; process-wide and safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardformer::kernels {

struct KernelTime {
  std::string call;  // the kernel and its sizes: "gemm m=2048 k=768 n=2304"
  int64_t calls = 0;
  double seconds = 0;  // wall time from entry to return, the kernel's own threads included
};

void set_kernel_timing(bool on);
bool kernel_timing();
// What was timed since the last reset, sorted by call.
std::vector<KernelTime> kernel_times();
void reset_kernel_times();

}  // namespace shardformer::kernels
