// Greedy decoding with a KV cache for any Model with an LM head, following HF generate():
// prompts left-padded, positions from the attention mask, finished rows padded.
#pragma once

#include "shardformer/model.h"
#include "shardformer/padding.h"

#include <functional>
#include <optional>
#include <vector>

namespace shardformer {

struct GenerationConfig {
  int64_t max_new_tokens = 20;
  std::optional<int64_t> eos_token_id;  // none: never stops early
  int64_t pad_token_id = 0;             // written for left padding and after a row finished
};

struct GenerationResult {
  at::Tensor sequences;  // [batch, prompt_len + steps] int64: left-padded prompts + new tokens
  std::vector<std::vector<int64_t>> new_tokens;  // per prompt, up to and including its eos
};

// Throws Error when the model has no LM head, a prompt is empty, or the total length exceeds
// the model's max_positions.
GenerationResult greedy_generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerationConfig& config);

// One decoding step: the greedy next token of every row [batch] int64 after running `inputs`
// (which carry the KV cache), the same on every rank. greedy_generate's default is the argmax
// of model.forward()'s last position; a pipeline runs the stages and broadcasts it.
using NextTokenFn = std::function<at::Tensor(const ForwardInputs& inputs)>;
GenerationResult greedy_generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerationConfig& config, const NextTokenFn& next_tokens);

}  // namespace shardformer
