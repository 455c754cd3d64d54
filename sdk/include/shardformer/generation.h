// Decoding with a KV cache for any Model with an LM head, following HF generate(): prompts
// left-padded, positions from the attention mask, greedy or sampled tokens (sampling.h),
// finished rows padded. An encoder-decoder model runs its encoder on the prompts at the first
// step only and decodes from decoder_start_token_id, its cross-attention keys and values cached.
#pragma once

#include "shardformer/model.h"
#include "shardformer/padding.h"
#include "shardformer/sampling.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardformer {

struct GenerationConfig {
  int64_t max_new_tokens = 20;
  std::optional<int64_t> eos_token_id;      // none: never stops early
  std::vector<int64_t> more_eos_token_ids;  // further ids that end a row (HF's eos lists)
  int64_t pad_token_id = 0;                 // written for left padding and after a row finished
  // An encoder-decoder model's first decoder token (config.json / generation_config.json).
  std::optional<int64_t> decoder_start_token_id;
  // An encoder-decoder model's first decoder tokens, the same for every row, instead
  // (Whisper's <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>).
  std::vector<int64_t> decoder_prompt;
  SamplingConfig sampling;
  // Called on every rank after each step with the step's token of every row (pad for rows
  // already finished); setting stop[row] ends that row after this token (stop strings). It
  // must decide the same on every rank.
  std::function<void(const std::vector<int64_t>& tokens, std::vector<bool>& stop)> on_step;

  bool is_eos(int64_t id) const;
};

struct GenerationResult {
  // [batch, prompt_len + steps] int64: left-padded prompts + new tokens; an encoder-decoder
  // model's [batch, 1 + steps]: decoder_start_token_id + new tokens, as HF returns them.
  at::Tensor sequences;
  // per prompt, up to and including its eos or the token on_step stopped it at
  std::vector<std::vector<int64_t>> new_tokens;
};

// Takes the model folder's generation_config.json (when there is one) into `config`: its eos
// ids (one or a list), pad id, sampling settings and suppressed tokens, as HF generate() does.
// Throws CheckpointError naming a key that would change decoding and is not supported, unless
// it is one of `read_by_caller` (Whisper's, which audio::TranscriptionSettings reads).
void apply_generation_config_file(const std::filesystem::path& folder, GenerationConfig& config,
                                  const std::set<std::string>& read_by_caller = {});

// Throws Error when the model has no LM head, a prompt is empty, or the total length exceeds
// the model's max_positions.
GenerationResult generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationConfig& config);

// One decoding step as a rank runs it: `logits` runs `inputs` (which carry the KV cache) and
// returns the last position's logits [batch, vocab] where this rank has them (undefined
// where it has not, as on a pipeline's first stages); `share` then gives every rank the
// tokens [batch] int64 that a rank with logits chose. generate's default is model.forward()
// with nothing to share; a pipeline runs its stages and broadcasts from the last.
struct DecodeStep {
  std::function<at::Tensor(const ForwardInputs& inputs)> logits;
  std::function<void(at::Tensor& tokens)> share;
};
GenerationResult generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationConfig& config, const DecodeStep& step);

// An audio encoder-decoder model (Whisper): the encoder reads input_features [batch, mels,
// frames] once; sequences are the decoder's (its prompt, then the new tokens). Throws Error for
// another kind of model or features of another rank.
GenerationResult generate_from_features(Model& model, const at::Tensor& input_features,
                                        const GenerationConfig& config);
GenerationResult generate_from_features(Model& model, const at::Tensor& input_features,
                                        const GenerationConfig& config, const DecodeStep& step);

// A model that also reads images (BLIP-2): the prompts hold the model's image placeholder
// tokens, and pixel_values [batch, channels, height, width] (one image per prompt) go with them
// into the first step only, whose keys and values the cache keeps (an encoder-decoder model's
// encoder reads both; sequences are then the decoder's). Throws Error for images of another
// rank or count.
GenerationResult generate_with_images(Model& model,
                                      const std::vector<std::vector<int64_t>>& prompts,
                                      const at::Tensor& pixel_values,
                                      const GenerationConfig& config, const DecodeStep& step);

// The DecodeStep of generate(model, prompts, config): model.forward(), nothing shared.
DecodeStep forward_step_of(Model& model);

}  // namespace shardformer
