// The process-wide table of kernel wall times (kernel_timing.h): a map from call to totals
// under a mutex, touched only while timing is on.
#include "kernel_time_scope.h"

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

namespace shardformer::kernels {
namespace {

std::atomic<bool> timing_on{false};

struct Table {
  std::mutex mutex;
  std::map<std::string, KernelTime> calls;
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

void set_kernel_timing(bool on) { timing_on.store(on, std::memory_order_relaxed); }
bool kernel_timing() { return timing_on.load(std::memory_order_relaxed); }

std::vector<KernelTime> kernel_times() {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<KernelTime> times;
  for (const auto& [call, time] : t.calls) times.push_back(time);
  return times;
}

void reset_kernel_times() {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.calls.clear();
}

std::string kernel_call(const char* kernel,
                        std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  std::ostringstream out;
  out << kernel;
  for (const auto& [name, value] : sizes) out << ' ' << name << '=' << value;
  return out.str();
}

void record_kernel_time(const std::string& call, double seconds) {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  KernelTime& time = t.calls[call];
  time.call = call;
  time.calls += 1;
  time.seconds += seconds;
}

}  // namespace shardformer::kernels
