// GPipe, 1F1B and interleaved 1F1B action lists (the interleaved order follows Megatron-LM's
// forward_backward_pipelining_with_interleaving).
#include "shardformer/pipeline/schedule.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace shardformer::pipeline {
namespace {

using Kind = PipelineAction::Kind;

// Interleaved order: micro-batches go in groups of num_stages through chunk 0, then the same
// group through chunk 1, ...; backwards walk the chunks in reverse.
PipelineAction interleaved_action(const ScheduleShape& s, int64_t k, Kind kind) {
  const int64_t group = s.num_stages * s.num_chunks;
  int64_t chunk = (k % group) / s.num_stages;
  if (kind == Kind::kBackward) chunk = s.num_chunks - 1 - chunk;
  const int64_t microbatch = (k / group) * s.num_stages + k % s.num_stages;
  return {kind, microbatch, chunk};
}

}  // namespace

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
  }
  return "?";
}

ScheduleKind parse_schedule(std::string_view name) {
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    if (name == schedule_name(kind)) return kind;
  }
  throw ConfigError(
      str("unknown pipeline schedule '", name, "' (expected gpipe, 1f1b or interleaved)"));
}

void check_schedule(ScheduleKind kind, const ScheduleShape& s) {
  if (s.num_stages < 1 || s.num_microbatches < 1 || s.num_chunks < 1) {
    throw ConfigError(str("pipeline: ", s.num_stages, " stages, ", s.num_microbatches,
                          " micro-batches and ", s.num_chunks, " chunks must all be positive"));
  }
  if (kind != ScheduleKind::kInterleaved && s.num_chunks != 1) {
    throw ConfigError(str("pipeline: the ", schedule_name(kind), " schedule runs one model chunk ",
                          "per stage, not ", s.num_chunks, " (virtual stages need interleaved)"));
  }
  if (kind == ScheduleKind::kInterleaved) {
    if (s.num_chunks < 2) {
      throw ConfigError("pipeline: the interleaved schedule needs num_model_chunks >= 2");
    }
    if (s.num_microbatches % s.num_stages != 0) {
      throw ConfigError(str("pipeline: the interleaved schedule needs num_microbatches (",
                            s.num_microbatches, ") to be a multiple of the stage count (",
                            s.num_stages, ")"));
    }
  }
}

std::vector<PipelineAction> schedule_actions(ScheduleKind kind, const ScheduleShape& s,
                                             int64_t stage, bool forward_only) {
  check_schedule(kind, s);
  const int64_t m = s.num_microbatches, p = s.num_stages;
  std::vector<PipelineAction> actions;
  if (kind != ScheduleKind::kInterleaved) {
    const auto forward = [&](int64_t mb) { actions.push_back({Kind::kForward, mb, 0}); };
    const auto backward = [&](int64_t mb) { actions.push_back({Kind::kBackward, mb, 0}); };
    const int64_t warmup =
        forward_only || kind == ScheduleKind::kGPipe ? m : std::min(p - stage - 1, m);
    for (int64_t mb = 0; mb < warmup; ++mb) forward(mb);
    if (forward_only) return actions;
    for (int64_t mb = warmup; mb < m; ++mb) {  // steady 1F1B
      forward(mb);
      backward(mb - warmup);
    }
    for (int64_t mb = m - warmup; mb < m; ++mb) backward(mb);
    return actions;
  }
  const int64_t total = m * s.num_chunks;
  if (forward_only) {
    for (int64_t k = 0; k < total; ++k) actions.push_back(interleaved_action(s, k, Kind::kForward));
    return actions;
  }
  const int64_t warmup = std::min((p - stage - 1) * 2 + (s.num_chunks - 1) * p, total);
  for (int64_t k = 0; k < warmup; ++k) actions.push_back(interleaved_action(s, k, Kind::kForward));
  for (int64_t k = warmup; k < total; ++k) {
    actions.push_back(interleaved_action(s, k, Kind::kForward));
    actions.push_back(interleaved_action(s, k - warmup, Kind::kBackward));
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    actions.push_back(interleaved_action(s, k, Kind::kBackward));
  }
  return actions;
}

double theoretical_bubble(const ScheduleShape& s) {
  const auto p = static_cast<double>(s.num_stages);
  return (p - 1) / (static_cast<double>(s.num_chunks * s.num_microbatches) + p - 1);
}

ScheduleSimulation simulate_schedule(ScheduleKind kind, const ScheduleShape& s, double forward_time,
                                     double backward_time) {
  const int64_t p = s.num_stages, v = s.num_chunks;
  std::vector<std::vector<PipelineAction>> actions;
  for (int64_t stage = 0; stage < p; ++stage) {
    actions.push_back(schedule_actions(kind, s, stage, /*forward_only=*/false));
  }
  // Piece k = chunk * p + stage. When each (kind, micro-batch, piece) finished, once it has.
  std::map<std::tuple<int, int64_t, int64_t>, double> done;
  const auto finished = [&](Kind kind, int64_t mb, int64_t piece) -> std::optional<double> {
    const auto it = done.find({static_cast<int>(kind), mb, piece});
    return it == done.end() ? std::nullopt : std::optional<double>(it->second);
  };
  const int64_t last_piece = p * v - 1;
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0), busy(p, 0);
  std::vector<int64_t> live(p, 0);
  ScheduleSimulation result;
  result.max_live.assign(p, 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t stage = 0; stage < p; ++stage) {
      while (next[stage] < actions[stage].size()) {
        const PipelineAction& a = actions[stage][next[stage]];
        const int64_t piece = a.chunk * p + stage;
        // What this action waits for: the previous piece's forward or the next one's backward.
        std::optional<double> ready = 0.0;
        if (a.kind == Kind::kForward && piece > 0)
          ready = finished(Kind::kForward, a.microbatch, piece - 1);
        if (a.kind == Kind::kBackward && piece < last_piece) {
          ready = finished(Kind::kBackward, a.microbatch, piece + 1);
        }
        if (!ready) break;
        const double cost = a.kind == Kind::kForward ? forward_time : backward_time;
        clock[stage] = std::max(clock[stage], *ready) + cost;
        busy[stage] += cost;
        done[{static_cast<int>(a.kind), a.microbatch, piece}] = clock[stage];
        live[stage] += a.kind == Kind::kForward ? 1 : -1;
        result.max_live[stage] = std::max(result.max_live[stage], live[stage]);
        ++next[stage];
        progressed = true;
      }
    }
  }
  std::vector<int64_t> stalled;
  for (int64_t stage = 0; stage < p; ++stage) {
    if (next[stage] < actions[stage].size()) stalled.push_back(stage);
  }
  if (!stalled.empty()) {
    throw Error(str("pipeline: the ", schedule_name(kind), " schedule deadlocks at ", p,
                    " stages, ", s.num_microbatches, " micro-batches, ", v, " chunks (stages ",
                    join(stalled, ", "), " wait)"));
  }
  result.makespan = *std::max_element(clock.begin(), clock.end());
  for (int64_t stage = 0; stage < p; ++stage) {
    result.idle_fraction.push_back(1.0 - busy[stage] / result.makespan);
  }
  return result;
}

}  // namespace shardformer::pipeline
