// Pipeline schedules as data: the ordered forward/backward actions one stage runs for a batch
// of micro-batches under GPipe, 1F1B or interleaved 1F1B (Megatron's virtual stages).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer::pipeline {

enum class ScheduleKind {
  kGPipe,        // every forward, then every backward: m micro-batches' activations live
  kOneFOneB,     // warm-up forwards, then one forward / one backward: at most p live
  kInterleaved,  // 1F1B over v model chunks per stage: the bubble shrinks by v
};

// "gpipe", "1f1b", "interleaved"; parse throws ConfigError naming the accepted values.
const char* schedule_name(ScheduleKind kind);
ScheduleKind parse_schedule(std::string_view name);

struct PipelineAction {
  enum class Kind { kForward, kBackward };
  Kind kind;
  int64_t microbatch;
  int64_t chunk;
  bool operator==(const PipelineAction&) const = default;
};

struct ScheduleShape {
  int64_t num_stages = 1;
  int64_t num_microbatches = 1;
  int64_t num_chunks = 1;  // model chunks per stage: 1, or >= 2 for the interleaved schedule
};

// Throws ConfigError when the schedule cannot run this shape: GPipe and 1F1B need one chunk,
// interleaved needs at least two and a micro-batch count that divides by the stage count.
void check_schedule(ScheduleKind kind, const ScheduleShape& shape);

// The actions of `stage`, in order. forward_only: every forward in the schedule's forward
// order (inference). Each (micro-batch, chunk) is forwarded once and, unless forward_only,
// backwarded once after its forward. Posting sends without waiting and blocking on receives,
// every stage's list runs to the end (tested by simulation for every shape up to 8 stages).
std::vector<PipelineAction> schedule_actions(ScheduleKind kind, const ScheduleShape& shape,
                                             int64_t stage, bool forward_only);

// What a schedule costs on an ideal machine: every stage's actions replayed with a fixed time
// per forward and backward of one chunk and instant communication. Throws Error naming the
// stalled stages when the schedule deadlocks (never, for the three schedules above).
struct ScheduleSimulation {
  double makespan = 0;                // time until the last stage finishes
  std::vector<double> idle_fraction;  // per stage: 1 - busy / makespan
  std::vector<int64_t> max_live;      // per stage: most (micro-batch, chunk) activations alive
};
ScheduleSimulation simulate_schedule(ScheduleKind kind, const ScheduleShape& shape,
                                     double forward_time, double backward_time);

// The textbook bubble of 1F1B and GPipe, (p - 1) / (m + p - 1), and of interleaved 1F1B with
// v chunks, (p - 1) / (v m + p - 1): the idle fraction of every stage.
double theoretical_bubble(const ScheduleShape& shape);

}  // namespace shardformer::pipeline
