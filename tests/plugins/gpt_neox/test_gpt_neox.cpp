// The GPT-NeoX plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: Pythia's
// layout (parallel residual, a quarter of each head rotated, untied embed_out) and the
// sequential residual without attention biases, tied, with 6 heads (uneven at tp 4) and the
// older rotary_pct / rotary_emb_base keys.
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class GPTNeoXFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(GPTNeoXFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "GPTNeoXForCausalLM", "GPTNeoXModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, GPTNeoXFamily,
    ::testing::Combine(::testing::Values("tiny-gpt-neox", "tiny-gpt-neox-seq"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// config.json keys that change no math load and the logits still equal HF's; keys that change
// the math are refused.
TEST(GPTNeoXConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-gpt-neox", "families", "GPTNeoXForCausalLM", "forward_logits");
}

}  // namespace
