// GPT-2 under sequence parallelism against HF transformers: split_gather (with and without
// overlap), all_to_all and ring_attn at tp / sp 2 and 4, with tp and with pp 2, for a sequence
// length that the group divides (16) and one it does not (11, padded); the collectives one
// forward pass issues per mode; refusals of layouts a mode cannot run and of families that do
// not support it.
#include "family_checks.h"
#include "shardformer/error.h"

using namespace shardformer;
using shardformer::testing::check_sequence_parallel_against_hf;
using shardformer::testing::Layout;
using shardformer::testing::layout_session;
using shardformer::testing::ModelFixture;
using shardformer::testing::on_ranks;

namespace {

class Gpt2SequenceParallel : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(Gpt2SequenceParallel, MatchesHF) {
  const auto& [model, layout] = GetParam();
  check_sequence_parallel_against_hf(model, "GPT2LMHeadModel", "GPT2Model", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, Gpt2SequenceParallel,
    ::testing::Combine(::testing::Values("tiny-gpt2-sp", "tiny-gpt2-sp-even"),
                       ::testing::ValuesIn(shardformer::testing::sequence_parallel_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

constexpr int64_t kLayers = 4, kHidden = 64, kHeads = 8, kHeadDim = 8;

// The collectives of one forward pass of the base model (4 blocks) on a batch of 4 x 11 tokens.
distributed::CommStats forward_stats(const ModelFixture& f, const distributed::ProcessMesh* mesh,
                                     const Layout& layout, const distributed::ProcessGroup& group) {
  const auto session = layout_session(f, mesh, "GPT2Model", layout);
  group.reset_stats();
  session->forward(f.forward_inputs());
  return group.stats();
}

TEST(Gpt2SequenceCollectives, SplitGatherGathersAndReduceScattersPerBlock) {
  const Layout layout{.tp = 2, .name = "sg", .sequence_mode = "split_gather"};
  on_ranks("tiny-gpt2-sp", layout, [&](const ModelFixture& f, const auto* mesh, int) {
    const distributed::CommStats s = forward_stats(f, mesh, layout, mesh->tp());
    const int64_t batch = 4, padded = 12, local = padded / 2;
    // Per block: c_attn and c_fc gather [4, 6, 64]; c_proj (attention, MLP) reduce-scatter
    // [4, 12, 64]. Plus the vocab-parallel embedding's all-reduce and the final gather.
    EXPECT_EQ(s.all_gathers, 2 * kLayers + 1);
    EXPECT_EQ(s.all_gather_elements, (2 * kLayers + 1) * batch * local * kHidden);
    EXPECT_EQ(s.reduce_scatters, 2 * kLayers);
    EXPECT_EQ(s.reduce_scatter_elements, 2 * kLayers * batch * padded * kHidden);
    EXPECT_EQ(s.all_reduces, 1);
    EXPECT_EQ(s.all_reduce_elements, batch * 11 * kHidden);
    EXPECT_EQ(s.all_to_alls, 0);
  });
}

TEST(Gpt2SequenceCollectives, UlyssesExchangesFourTimesPerAttention) {
  const Layout layout{.name = "a2a", .sp = 2, .sequence_mode = "all_to_all"};
  on_ranks("tiny-gpt2-sp", layout, [&](const ModelFixture& f, const auto* mesh, int) {
    const distributed::CommStats s = forward_stats(f, mesh, layout, mesh->sp());
    const int64_t batch = 4, local = 6;
    // q, k, v [4, 8 heads, 6, 8] out and the output [4, 4 heads, 12, 8] back: equal sizes.
    EXPECT_EQ(s.all_to_alls, 4 * kLayers);
    EXPECT_EQ(s.all_to_all_elements, 4 * kLayers * batch * kHeads * local * kHeadDim);
    EXPECT_EQ(s.all_gathers, 1);  // the final gather
    EXPECT_EQ(s.all_reduces + s.reduce_scatters + s.sends, 0);
  });
}

TEST(Gpt2SequenceCollectives, RingPassesKeysAndValuesRound) {
  const Layout layout{.name = "ring", .sp = 4, .sequence_mode = "ring_attn"};
  on_ranks("tiny-gpt2-sp", layout, [&](const ModelFixture& f, const auto* mesh, int) {
    const distributed::CommStats s = forward_stats(f, mesh, layout, mesh->sp());
    const int64_t batch = 4, local = 16 / 4;  // 11 tokens padded to 2 x 4 chunks of 2
    // sp - 1 steps, each sending this rank's current keys and values on.
    EXPECT_EQ(s.sends, kLayers * 3 * 2);
    EXPECT_EQ(s.send_elements, kLayers * 3 * 2 * batch * kHeads * local * kHeadDim);
    EXPECT_EQ(s.all_gathers, 1);
    EXPECT_EQ(s.all_to_alls + s.all_reduces + s.reduce_scatters, 0);
  });
}

// Layouts a mode cannot run are refused when the model is built, naming the key.
TEST(Gpt2SequenceRefusals, ModesNeedTheirAxis) {
  const auto refused = [](const Layout& layout, const std::string& expected) {
    on_ranks("tiny-gpt2-sp", layout, [&](const ModelFixture& f, const auto* mesh, int) {
      try {
        layout_session(f, mesh, "GPT2LMHeadModel", layout);
        ADD_FAILURE() << layout.name << ": built";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
    });
  };
  refused({.tp = 1, .name = "sg_no_tp", .sp = 2, .sequence_mode = "split_gather"},
          "needs parallel.tp_size > 1");
  refused({.tp = 2, .name = "sg_with_sp", .sp = 2, .sequence_mode = "split_gather"},
          "parallel.sp_size = 2 is for all_to_all and ring_attn");
  refused({.tp = 2, .name = "ring_no_sp", .sequence_mode = "ring_attn"},
          "set parallel.sp_size > 1");
  refused({.name = "overlap_ring", .sp = 2, .sequence_mode = "ring_attn", .sequence_overlap = true},
          "enable_sequence_overlap applies to split_gather only");
}

// A family whose policy does not list the mode refuses it (through the plugin: a ModelError).
TEST(Gpt2SequenceRefusals, FamiliesWithoutSupportRefuse) {
  const Layout layout{.tp = 2, .name = "opt_sg", .sequence_mode = "split_gather"};
  on_ranks("tiny-opt", layout, [&](const ModelFixture& f, const auto* mesh, int) {
    try {
      layout_session(f, mesh, "OPTForCausalLM", layout);
      ADD_FAILURE() << "OPT built with sequence parallelism";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("this model family does not support it"),
                std::string::npos)
          << e.what();
    }
  });
}

// config.json keys that change no math (bookkeeping, token ids, generation defaults, export
// tools' leftovers) load and the logits still equal HF's; keys that change the math are refused.
TEST(Gpt2ConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-gpt2-sp", "families",
                                                              "GPT2LMHeadModel", "forward_logits");
}

}  // namespace
