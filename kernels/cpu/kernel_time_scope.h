// Internal: the scope that times one kernel call while kernel timing is on (kernel_timing.h).
#pragma once

#include "shardformer/kernels/kernel_timing.h"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace shardformer::kernels {

// "gemm m=2048 k=768 n=2304" from ("gemm", {{"m", 2048}, {"k", 768}, {"n", 2304}}).
std::string kernel_call(const char* kernel,
                        std::initializer_list<std::pair<const char*, int64_t>> sizes);
void record_kernel_time(const std::string& call, double seconds);

class KernelTimeScope {
 public:
  // `name` builds the call's name; it runs only while timing is on.
  template <typename Name>
  explicit KernelTimeScope(const Name& name) {
    if (kernel_timing()) {
      call_ = name();
      start_ = std::chrono::steady_clock::now();
    }
  }
  ~KernelTimeScope() {
    if (call_.empty()) return;
    record_kernel_time(
        call_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  KernelTimeScope(const KernelTimeScope&) = delete;
  KernelTimeScope& operator=(const KernelTimeScope&) = delete;

 private:
  std::string call_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace shardformer::kernels
