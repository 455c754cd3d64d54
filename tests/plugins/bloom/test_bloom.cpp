// The BLOOM plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: 12 heads (not a
// power of two, so the ALiBi slopes interleave two series; each rank slices its heads'), the
// per-head fused QKV, the word-embedding LayerNorm and a tied head.
#include "family_checks.h"

using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

class BloomFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(BloomFamily, MatchesHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "BloomForCausalLM", "BloomModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, BloomFamily,
    ::testing::Combine(::testing::Values("tiny-bloom"),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// config.json keys that change no math (bookkeeping, token ids, generation defaults, export
// tools' leftovers) load and the logits still equal HF's; keys that change the math are refused.
TEST(BloomConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-bloom", "families",
                                                              "BloomForCausalLM", "forward_logits");
}

}  // namespace
