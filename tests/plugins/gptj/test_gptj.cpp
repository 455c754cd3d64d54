// The GPT-J plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: GPT-J-6B's layout
// (parallel residual over ln_1, interleaved rotary on half of each head, lm_head with a bias)
// and every feature rotated with 6 heads (uneven at tp 4).
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class GPTJFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(GPTJFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "GPTJForCausalLM", "GPTJModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, GPTJFamily,
    ::testing::Combine(::testing::Values("tiny-gptj", "tiny-gptj-full-rotary"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// config.json keys that change no math load and the logits still equal HF's; keys that change
// the math are refused.
TEST(GPTJConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-gptj", "families",
                                                              "GPTJForCausalLM", "forward_logits");
}

}  // namespace
