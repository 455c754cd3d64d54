// The Falcon plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: Falcon-7B's
// layout (multi-query with 5 query heads, shared by every rank and split unevenly; the parallel
// block), Falcon-40B's (grouped KV, ln_attn / ln_mlp) and Falcon-RW's (ALiBi, sequential, biases).
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

// config.json keys that change no math load and the logits still equal HF's; keys that change
// the math are refused.
TEST(FalconConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-falcon", "families", "FalconForCausalLM", "forward_logits");
}

}  // namespace
