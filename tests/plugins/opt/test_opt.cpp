// The OPT plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: pre-LayerNorm
// (OPT-125m's layout), post-LayerNorm without a final norm, and word_embed_proj_dim 32 with
// project_in / project_out (OPT-350m's layout); learned positions with their offset of 2.
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class OPTFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(OPTFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "OPTForCausalLM", "OPTModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, OPTFamily,
    ::testing::Combine(::testing::Values("tiny-opt", "tiny-opt-post-ln", "tiny-opt-proj"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// config.json keys that change no math (bookkeeping, token ids, generation defaults, export
// tools' leftovers) load and the logits still equal HF's; keys that change the math are refused.
TEST(OPTConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-opt", "families",
                                                              "OPTForCausalLM", "forward_logits");
}

}  // namespace
