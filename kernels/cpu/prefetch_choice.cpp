// The skinny products' read-way choice (skinny_prefetch.h): per row count and weight layout,
// the ways a product can take run in turn on the process's first products from memory, and the
// fastest stays.
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
// the first pass); then each way reads this much before the fastest is kept.
constexpr double kWarmUpBytes = 256.0 * (1 << 20);
constexpr double kMeasureBytes = 128.0 * (1 << 20);

constexpr int kWays = 3;
// The order the ways are tried in, and the order that settles a tie: the prefetch first, the way
// every CPU ran before the choice was measured.
constexpr std::array<ReadWay, kWays> kTryOrder{ReadWay::kOn, ReadWay::kOff, ReadWay::kStreams};

const char* way_name(ReadWay way) {
  switch (way) {
    case ReadWay::kOn: return "on";
    case ReadWay::kOff: return "off";
    case ReadWay::kStreams: return "streams";
  }
  return "?";
}

struct Slot {
  std::atomic<int> decided{-1};  // -1 measuring, else the ReadWay kept
  std::atomic<int64_t> tries{0};
  std::mutex mutex;  // guards what follows, taken only while measuring
  double warmed = 0;
  std::array<double, kWays> bytes{}, seconds{};  // by ReadWay
};

constexpr int kRowCounts = 8;
std::array<std::array<Slot, kRowCounts>, 2> slots;  // [k_major][rows - 1]

SkinnyPrefetch mode_from_environment() {
  const std::string mode =
      environment_choice("SHARDFORMER_SKINNY_PREFETCH", {"measure", "on", "off", "streams"});
  if (mode == "on") return SkinnyPrefetch::kOn;
  if (mode == "off") return SkinnyPrefetch::kOff;
  if (mode == "streams") return SkinnyPrefetch::kStreams;
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

bool way_offered(ReadWay way, int rows, bool k_major) {
  (void)rows;  // every row group (1 .. 8 rows) streams
  return way != ReadWay::kStreams || !k_major;
}

ReadChoice read_way(int rows, bool k_major, int64_t bytes) {
  const SkinnyPrefetch mode = mode_slot().load(std::memory_order_relaxed);
  switch (mode) {
    case SkinnyPrefetch::kOn: return {ReadWay::kOn, false};
    case SkinnyPrefetch::kOff: return {ReadWay::kOff, false};
    case SkinnyPrefetch::kStreams:
      return {way_offered(ReadWay::kStreams, rows, k_major) ? ReadWay::kStreams : ReadWay::kOff,
              false};
    case SkinnyPrefetch::kMeasure: break;
  }
  Slot& s = slot_of(rows, k_major);
  const int decided = s.decided.load(std::memory_order_relaxed);
  if (decided >= 0) return {static_cast<ReadWay>(decided), false};
  if (bytes < kMinBytes) return {ReadWay::kOn, false};
  const int ways = way_offered(ReadWay::kStreams, rows, k_major) ? kWays : kWays - 1;
  const int64_t turn = s.tries.fetch_add(1, std::memory_order_relaxed) % ways;
  return {kTryOrder[static_cast<size_t>(turn)], true};
}

void report_read_try(int rows, bool k_major, ReadWay way, int64_t bytes, double seconds) {
  Slot& s = slot_of(rows, k_major);
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.decided.load(std::memory_order_relaxed) >= 0) return;
  if (s.warmed < kWarmUpBytes) {
    s.warmed += static_cast<double>(bytes);
    return;
  }
  const auto w = static_cast<size_t>(way);
  s.bytes[w] += static_cast<double>(bytes);
  s.seconds[w] += seconds;
  int best = -1;
  for (const ReadWay candidate : kTryOrder) {
    if (!way_offered(candidate, rows, k_major)) continue;
    const auto c = static_cast<size_t>(candidate);
    if (s.bytes[c] < kMeasureBytes) return;
    if (best < 0 || s.bytes[c] / s.seconds[c] >
                        s.bytes[static_cast<size_t>(best)] / s.seconds[static_cast<size_t>(best)]) {
      best = static_cast<int>(c);
    }
  }
  s.decided.store(best);
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
    case SkinnyPrefetch::kStreams: return "streams";
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
      const auto rate = [&](size_t w) { return s.bytes[w] / s.seconds[w] / 1e9; };
      char line[160];
      std::snprintf(line, sizeof line, "%s%d row%s%s %s (%.1f GB/s", separator, rows,
                    rows == 1 ? "" : "s", k_major == 1 ? " (Conv1D)" : "",
                    way_name(static_cast<ReadWay>(decided)), rate(static_cast<size_t>(decided)));
      out += line;
      const char* between = "; ";
      for (const ReadWay other : kTryOrder) {
        if (static_cast<int>(other) == decided || !way_offered(other, rows, k_major == 1)) continue;
        std::snprintf(line, sizeof line, "%s%s %.1f", between, way_name(other),
                      rate(static_cast<size_t>(other)));
        out += line;
        between = ", ";
      }
      out += ")";
      separator = ", ";
    }
  }
  return separator[0] == ':' ? out + ", nothing decided yet" : out;
}

}  // namespace shardformer::kernels
