// GPipe, 1F1B and interleaved 1F1B action lists (the interleaved order follows Megatron-LM's
// forward_backward_pipelining_with_interleaving).
#include "shardformer/pipeline/schedule.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>

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

}  // namespace shardformer::pipeline
