// The Llama-family plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: Llama
// (grouped-query attention with fewer KV heads than tp = 4; rope scalings linear, dynamic NTK
// and Llama 3; head_dim != hidden / heads with attention and MLP biases, gelu and a tied head;
// bf16 weights in an fp32 job), Mistral (a sliding window shorter than the generation), Qwen2
// (QKV bias, tied head) and Qwen3 (per-head q / k norms).
#include "family_checks.h"

using namespace shardformer;
using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

struct Case {
  std::string model, architecture, base;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class LlamaFamily : public ::testing::TestWithParam<std::tuple<Case, Layout>> {};

TEST_P(LlamaFamily, MatchesHFAtThisLayout) {
  const auto& [c, layout] = GetParam();
  check_decoder_against_hf(c.model, c.architecture, c.base, layout);
}

const Case kCases[] = {
    {"tiny-llama", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-linear", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-dynamic", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-llama3", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-options", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-bf16", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-mistral", "MistralForCausalLM", "MistralModel"},
    {"tiny-qwen2", "Qwen2ForCausalLM", "Qwen2Model"},
    {"tiny-qwen3", "Qwen3ForCausalLM", "Qwen3Model"},
};

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, LlamaFamily,
    ::testing::Combine(::testing::ValuesIn(kCases),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param).model,
                                             std::get<1>(info.param));
    });

}  // namespace
