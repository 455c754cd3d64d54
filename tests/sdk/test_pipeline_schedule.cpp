// Pipeline schedules: every action list forwards and backwards each (micro-batch, chunk) once,
// in a valid order, without deadlock for every shape up to 8 stages; 1F1B and GPipe reach the
// textbook (p - 1) / (m + p - 1) bubble, interleaving shrinks it, and 1F1B bounds the live
// activations by the stage count where GPipe keeps all m.
#include "shardformer/error.h"
#include "shardformer/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

using namespace shardformer;
using namespace shardformer::pipeline;
using Kind = PipelineAction::Kind;

namespace {

// Every (micro-batch, chunk) forwarded once, then (unless forward-only) backwarded once.
void expect_complete(const std::vector<PipelineAction>& actions, const ScheduleShape& s,
                     bool forward_only, const std::string& what) {
  std::map<std::pair<int64_t, int64_t>, int> state;  // 1 after the forward, 2 after backward
  for (const PipelineAction& a : actions) {
    int& st = state[{a.microbatch, a.chunk}];
    ASSERT_GE(a.microbatch, 0) << what;
    ASSERT_LT(a.microbatch, s.num_microbatches) << what;
    ASSERT_LT(a.chunk, s.num_chunks) << what;
    if (a.kind == Kind::kForward) {
      ASSERT_EQ(st, 0) << what << ": forward twice";
      st = 1;
    } else {
      ASSERT_EQ(st, 1) << what << ": backward without forward";
      st = 2;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(state.size()), s.num_microbatches * s.num_chunks) << what;
  for (const auto& [key, st] : state) EXPECT_EQ(st, forward_only ? 1 : 2) << what;
}

}  // namespace

TEST(PipelineSchedule, EveryShapeRunsEveryMicroBatchOnceWithoutDeadlock) {
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    for (int64_t p = 1; p <= 8; ++p) {
      for (int64_t m = 1; m <= 16; ++m) {
        for (int64_t v = 1; v <= 4; ++v) {
          const ScheduleShape s{p, m, v};
          const bool valid = kind == ScheduleKind::kInterleaved ? (v >= 2 && m % p == 0) : v == 1;
          if (!valid) {
            EXPECT_THROW(check_schedule(kind, s), ConfigError);
            continue;
          }
          const std::string what = std::string(schedule_name(kind)) + " p" + std::to_string(p) +
                                   " m" + std::to_string(m) + " v" + std::to_string(v);
          for (int64_t stage = 0; stage < p; ++stage) {
            expect_complete(schedule_actions(kind, s, stage, false), s, false, what);
            expect_complete(schedule_actions(kind, s, stage, true), s, true, what);
          }
          EXPECT_NO_THROW(simulate_schedule(kind, s, 1.0, 2.0)) << what;
        }
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBAndGPipeReachTheTextbookBubble) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int64_t p : {2, 4, 8}) {
      for (int64_t m : {1, 4, 8, 32}) {
        const ScheduleShape s{p, m, 1};
        const ScheduleSimulation sim = simulate_schedule(kind, s, 1.0, 2.0);
        EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * static_cast<double>(m + p - 1));
        for (double idle : sim.idle_fraction) EXPECT_NEAR(idle, theoretical_bubble(s), 1e-12);
      }
    }
  }
}

TEST(PipelineSchedule, InterleavingShrinksTheBubble) {
  for (int64_t p : {2, 4}) {
    for (int64_t m : {4, 8, 16}) {
      const double one_f_one_b =
          simulate_schedule(ScheduleKind::kOneFOneB, {p, m, 1}, 1.0, 2.0).makespan;
      // Two chunks of half the layers each: half the time per action.
      const ScheduleShape s{p, m, 2};
      const ScheduleSimulation sim = simulate_schedule(ScheduleKind::kInterleaved, s, 0.5, 1.0);
      EXPECT_LT(sim.makespan, one_f_one_b) << "p" << p << " m" << m;
      for (double idle : sim.idle_fraction) {
        EXPECT_NEAR(idle, theoretical_bubble(s), 1e-9) << "p" << p << " m" << m;
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBKeepsAtMostTheStageCountAliveAndGPipeKeepsAll) {
  const int64_t p = 4, m = 16;
  const auto gpipe = simulate_schedule(ScheduleKind::kGPipe, {p, m, 1}, 1.0, 2.0);
  const auto one_f_one_b = simulate_schedule(ScheduleKind::kOneFOneB, {p, m, 1}, 1.0, 2.0);
  for (int64_t stage = 0; stage < p; ++stage) {
    EXPECT_EQ(gpipe.max_live[stage], m);
    EXPECT_EQ(one_f_one_b.max_live[stage], p - stage);
  }
}

TEST(PipelineSchedule, OneFOneBOrderOnTheFirstOfTwoStages) {
  const auto actions = schedule_actions(ScheduleKind::kOneFOneB, {2, 3, 1}, 0, false);
  const std::vector<PipelineAction> expected{{Kind::kForward, 0, 0},  {Kind::kForward, 1, 0},
                                             {Kind::kBackward, 0, 0}, {Kind::kForward, 2, 0},
                                             {Kind::kBackward, 1, 0}, {Kind::kBackward, 2, 0}};
  EXPECT_EQ(actions, expected);
}

TEST(PipelineSchedule, ParsesNamesAndRefusesUnknownOnes) {
  EXPECT_EQ(parse_schedule("gpipe"), ScheduleKind::kGPipe);
  EXPECT_EQ(parse_schedule("1f1b"), ScheduleKind::kOneFOneB);
  EXPECT_EQ(parse_schedule("interleaved"), ScheduleKind::kInterleaved);
  try {
    parse_schedule("zero_bubble");
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected gpipe, 1f1b or interleaved"), std::string::npos);
  }
}
