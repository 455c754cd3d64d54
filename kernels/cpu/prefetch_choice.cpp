// The skinny products' prefetch choice (skinny_prefetch.h): per row count and weight layout,
// the two ways alternate on the process's first products from memory and the faster stays.
#include "prefetch_choice.h"

#include "environment_choice.h"

#include "shardformer/kernels/skinny_prefetch.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace shardformer::kernels {
namespace {

// Products reading less than this are left out of the measurement and prefetch: their weights
// may sit in the caches, where the prefetch costs little, and their times are a few
// microseconds of parallel-region overhead.
constexpr int64_t kMinBytes = int64_t{1} << 20;
// A row count's first products warm its weights' pages (a mapped checkpoint faults them in on
// the first pass); then each way reads this much before the faster is kept.
constexpr double kWarmUpBytes = 256.0 * (1 << 20);
constexpr double kMeasureBytes = 128.0 * (1 << 20);

struct Slot {
  std::atomic<int> decided{-1};  // -1 measuring, 0 off, 1 on
  std::atomic<int64_t> tries{0};
  std::mutex mutex;  // guards what follows, taken only while measuring
  double warmed = 0;
  std::array<double, 2> bytes{}, seconds{};  // [off, on]
};

constexpr int kRowCounts = 8;
std::array<std::array<Slot, kRowCounts>, 2> slots;  // [k_major][rows - 1]

SkinnyPrefetch mode_from_environment() {
  const std::string mode =
      environment_choice("SHARDFORMER_SKINNY_PREFETCH", {"measure", "on", "off"});
  if (mode == "on") return SkinnyPrefetch::kOn;
  if (mode == "off") return SkinnyPrefetch::kOff;
  return SkinnyPrefetch::kMeasure;
}

std::atomic<SkinnyPrefetch>& mode_slot() {
  static std::atomic<SkinnyPrefetch> slot{mode_from_environment()};
  return slot;
}

Slot& slot_of(int rows, bool k_major) {
  TORCH_CHECK(rows >= 1 && rows <= kRowCounts, "skinny prefetch: ", rows, " rows");
  return slots[k_major ? 1 : 0][static_cast<size_t>(rows - 1)];
}

void restart_measurement() {
  for (auto& layout : slots) {
    for (Slot& s : layout) {
      const std::lock_guard<std::mutex> lock(s.mutex);
      s.decided.store(-1);
      s.tries.store(0);
      s.warmed = 0;
      s.bytes = {};
      s.seconds = {};
    }
  }
}

}  // namespace

PrefetchWay prefetch_way(int rows, bool k_major, int64_t bytes) {
  const SkinnyPrefetch mode = mode_slot().load(std::memory_order_relaxed);
  if (mode != SkinnyPrefetch::kMeasure) {
    return mode == SkinnyPrefetch::kOn ? PrefetchWay::kOn : PrefetchWay::kOff;
  }
  Slot& s = slot_of(rows, k_major);
  const int decided = s.decided.load(std::memory_order_relaxed);
  if (decided >= 0) return decided == 1 ? PrefetchWay::kOn : PrefetchWay::kOff;
  if (bytes < kMinBytes) return PrefetchWay::kOn;
  return s.tries.fetch_add(1, std::memory_order_relaxed) % 2 == 0 ? PrefetchWay::kTryOn
                                                                  : PrefetchWay::kTryOff;
}

void report_prefetch_try(int rows, bool k_major, bool on, int64_t bytes, double seconds) {
  Slot& s = slot_of(rows, k_major);
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.decided.load(std::memory_order_relaxed) >= 0) return;
  if (s.warmed < kWarmUpBytes) {
    s.warmed += static_cast<double>(bytes);
    return;
  }
  s.bytes[on ? 1 : 0] += static_cast<double>(bytes);
  s.seconds[on ? 1 : 0] += seconds;
  if (s.bytes[0] >= kMeasureBytes && s.bytes[1] >= kMeasureBytes) {
    // Ties keep the prefetch, the way every CPU ran before the choice was measured.
    s.decided.store(s.bytes[1] / s.seconds[1] >= s.bytes[0] / s.seconds[0] ? 1 : 0);
  }
}

SkinnyPrefetch set_skinny_prefetch(SkinnyPrefetch mode) {
  const SkinnyPrefetch before = mode_slot().exchange(mode);
  if (mode == SkinnyPrefetch::kMeasure) restart_measurement();
  return before;
}

std::string skinny_prefetch_summary() {
  switch (mode_slot().load()) {
    case SkinnyPrefetch::kOn: return "on";
    case SkinnyPrefetch::kOff: return "off";
    case SkinnyPrefetch::kMeasure: break;
  }
  std::string out = "measured";
  const char* separator = ": ";
  for (int k_major = 0; k_major < 2; ++k_major) {
    for (int rows = 1; rows <= kRowCounts; ++rows) {
      Slot& s = slot_of(rows, k_major == 1);
      const std::lock_guard<std::mutex> lock(s.mutex);
      const int decided = s.decided.load();
      if (decided < 0) continue;
      char line[160];
      std::snprintf(line, sizeof line, "%s%d row%s%s %s (%.1f against %.1f GB/s)", separator, rows,
                    rows == 1 ? "" : "s", k_major == 1 ? " (Conv1D)" : "",
                    decided == 1 ? "on" : "off", s.bytes[decided] / s.seconds[decided] / 1e9,
                    s.bytes[1 - decided] / s.seconds[1 - decided] / 1e9);
      out += line;
      separator = ", ";
    }
  }
  return separator[0] == ':' ? out + ", nothing decided yet" : out;
}

}  // namespace shardformer::kernels
