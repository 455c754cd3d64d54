// The GPT-Neo plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: global and
// local layers alternating (the window changes rows 0 and 3 of the forward batch and every
// generated row, tools/family_checkpoints.py), no q . k scaling, learned positions, a tied head.
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class GPTNeoFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(GPTNeoFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "GPTNeoForCausalLM", "GPTNeoModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, GPTNeoFamily,
    ::testing::Combine(::testing::Values("tiny-gpt-neo"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// config.json keys that change no math load and the logits still equal HF's; keys that change
// the math are refused.
TEST(GPTNeoConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-gpt-neo", "families", "GPTNeoForCausalLM", "forward_logits");
}

}  // namespace
