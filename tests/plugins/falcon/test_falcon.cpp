// The Falcon plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: Falcon-7B's
// layout (multi-query with 5 query heads, shared by every rank and split unevenly; the parallel
// block), Falcon-40B's (grouped KV, ln_attn / ln_mlp) and Falcon-RW's (ALiBi, sequential, biases);
// the rotary layouts under sequence parallelism.
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class FalconFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(FalconFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "FalconForCausalLM", "FalconModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, FalconFamily,
    ::testing::Combine(::testing::Values("tiny-falcon", "tiny-falcon-40b", "tiny-falcon-rw"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// Sequence parallelism in each mode: Falcon-40B's grouped layout (8 heads in 2 KV groups) under
// split_gather tp 2, all_to_all sp 2 and ring_attn sp 2; Falcon-7B's multi-query one (5 heads,
// which neither tp 2 nor all_to_all sp 2 divides) under ring_attn sp 2. ALiBi is refused.
class FalconSequenceParallel : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(FalconSequenceParallel, MatchesHF) {
  const auto& [model, layout] = GetParam();
  shardformer::testing::check_sequence_parallel_against_hf(model, "FalconForCausalLM",
                                                           "FalconModel", layout);
}

const Layout kSplitGatherTp2{.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"};
const Layout kAllToAllSp2{.name = "a2a_sp2", .sp = 2, .sequence_mode = "all_to_all"};
const Layout kRingSp2{.name = "ring_sp2", .sp = 2, .sequence_mode = "ring_attn"};

INSTANTIATE_TEST_SUITE_P(Checkpoints, FalconSequenceParallel,
                         ::testing::Values(std::tuple{"tiny-falcon-40b", kSplitGatherTp2},
                                           std::tuple{"tiny-falcon-40b", kAllToAllSp2},
                                           std::tuple{"tiny-falcon-40b", kRingSp2},
                                           std::tuple{"tiny-falcon", kRingSp2}),
                         [](const auto& info) {
                           return shardformer::testing::case_name(std::get<0>(info.param),
                                                                  std::get<1>(info.param));
                         });

TEST(FalconSequenceParallelRefusal, AlibiIsRefusedByName) {
  shardformer::testing::on_ranks(
      "tiny-falcon-rw", kSplitGatherTp2,
      [&](const shardformer::testing::ModelFixture& f,
          const shardformer::distributed::ProcessMesh* mesh, int) {
        try {
          shardformer::testing::layout_session(f, mesh, "FalconForCausalLM", kSplitGatherTp2);
          ADD_FAILURE() << "Falcon with ALiBi ran under sequence parallelism";
        } catch (const shardformer::ModelError& e) {
          EXPECT_NE(std::string(e.what()).find("alibi = true"), std::string::npos) << e.what();
        }
      });
}

// config.json keys that change no math load and the logits still equal HF's; keys that change
// the math are refused.
TEST(FalconConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-falcon", "families", "FalconForCausalLM", "forward_logits");
}

}  // namespace
