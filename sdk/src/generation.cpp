// Decoding with a KV cache, matching HF generate() token for token when greedy and its
// processed scores when sampling.
#include "shardformer/generation.h"

#include "shardformer/runtime/inference_scope.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <optional>

namespace shardformer {

namespace {

void check_prompts(const Model& model, const std::vector<std::vector<int64_t>>& prompts,
                   const GenerationConfig& config) {
  if (!model.has_lm_head()) {
    throw Error("generate needs a model with a language-model head; this model outputs " +
                model.output_name());
  }
  if (prompts.empty()) throw Error("generate: no prompts given");
  const ModelShape shape = model.shape();
  size_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) throw Error(str("generate: prompt ", i, " is empty"));
    for (int64_t id : prompts[i]) {
      if (id < 0 || id >= shape.vocab_size) {
        throw Error(str("generate: prompt ", i, " has token id ", id,
                        " outside the vocabulary [0, ", shape.vocab_size, ")"));
      }
    }
    longest = std::max(longest, prompts[i].size());
  }
  const auto check_id = [&](int64_t id, const char* what) {
    if (id < 0 || id >= shape.vocab_size) {
      throw Error(str("generate: ", what, " ", id, " is outside the vocabulary [0, ",
                      shape.vocab_size, ")"));
    }
  };
  check_id(config.pad_token_id, "pad_token_id");
  if (config.eos_token_id) check_id(*config.eos_token_id, "eos_token_id");
  for (int64_t id : config.more_eos_token_ids) check_id(id, "eos_token_id");
  if (config.max_new_tokens < 1) throw Error("generate: max_new_tokens must be at least 1");
  const int64_t total = static_cast<int64_t>(longest) + config.max_new_tokens;
  if (shape.max_positions > 0 && total > shape.max_positions) {
    throw Error(str("generate: longest prompt (", longest, ") + max_new_tokens (",
                    config.max_new_tokens, ") = ", total, " exceeds the model's ",
                    shape.max_positions, " positions"));
  }
}

}  // namespace

bool GenerationConfig::is_eos(int64_t id) const {
  return (eos_token_id && id == *eos_token_id) ||
         std::find(more_eos_token_ids.begin(), more_eos_token_ids.end(), id) !=
             more_eos_token_ids.end();
}

DecodeStep forward_step_of(Model& model) {
  return DecodeStep{.logits =
                        [&model](const ForwardInputs& inputs) {
                          return model.forward(inputs).select(1, -1);  // [batch, vocab]
                        },
                    .share = [](at::Tensor&) {}};
}

GenerationResult generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationConfig& config) {
  return generate(model, prompts, config, forward_step_of(model));
}

GenerationResult generate_from_features(Model& model, const at::Tensor& input_features,
                                        const GenerationConfig& config) {
  return generate_from_features(model, input_features, config, forward_step_of(model));
}

namespace {

// What decoding starts from: left-padded prompt ids with their mask (and the images a
// decoder-only model reads with them), or an audio encoder's features.
struct Source {
  at::Tensor input_ids, attention_mask, input_features, pixel_values;
  bool padded = false;  // some prompt is padded: the forward passes get the mask
  int64_t rows = 0;
};

GenerationResult decode_loop(Model& model, const Source& source, const GenerationConfig& config,
                             const DecodeStep& decode);

void check_seq2seq(const Model& model, const GenerationConfig& config) {
  if (model.is_encoder_decoder() && !config.decoder_start_token_id &&
      config.decoder_prompt.empty()) {
    throw Error(
        "generate: an encoder-decoder model needs decoder_start_token_id (config.json or "
        "generation_config.json)");
  }
}

Source prompt_source(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                     const GenerationConfig& config) {
  check_prompts(model, prompts, config);
  check_seq2seq(model, config);
  const c10::Device device = model.parameters().front().device();
  auto [input_ids, attention_mask] = left_pad(prompts, config.pad_token_id);
  const int64_t prompt_len = input_ids.size(1);
  // With no prompt padded the forward passes get no mask, which they read as every token seen:
  // the prompt's attention takes the plain causal path, and a decoding step's attention has no
  // mask for SDPA to convert in every layer (on a GPU four kernels a layer and token).
  const bool padded = std::any_of(prompts.begin(), prompts.end(), [&](const auto& prompt) {
    return static_cast<int64_t>(prompt.size()) != prompt_len;
  });
  return Source{.input_ids = input_ids.to(device),
                .attention_mask = attention_mask.to(device),
                .input_features = {},
                .pixel_values = {},
                .padded = padded,
                .rows = input_ids.size(0)};
}

}  // namespace

GenerationResult generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationConfig& config, const DecodeStep& decode) {
  return decode_loop(model, prompt_source(model, prompts, config), config, decode);
}

GenerationResult generate_with_images(Model& model,
                                      const std::vector<std::vector<int64_t>>& prompts,
                                      const at::Tensor& pixel_values,
                                      const GenerationConfig& config, const DecodeStep& decode) {
  if (!pixel_values.defined() || pixel_values.dim() != 4 ||
      pixel_values.size(0) != static_cast<int64_t>(prompts.size())) {
    throw Error(str("generate: pixel_values must be [", prompts.size(),
                    " images, channels, height, width], one per prompt"));
  }
  Source source = prompt_source(model, prompts, config);
  const at::Tensor any_param = model.parameters().front();
  source.pixel_values = pixel_values.to(any_param.device(), any_param.scalar_type());
  return decode_loop(model, source, config, decode);
}

GenerationResult generate_from_features(Model& model, const at::Tensor& input_features,
                                        const GenerationConfig& config, const DecodeStep& decode) {
  if (!model.is_encoder_decoder()) {
    throw Error("generate: audio features need an encoder-decoder model; this one outputs " +
                model.output_name());
  }
  if (!input_features.defined() || input_features.dim() != 3 || input_features.size(0) == 0) {
    throw Error("generate: input_features must be [batch, mels, frames]");
  }
  check_seq2seq(model, config);
  if (config.max_new_tokens < 1) throw Error("generate: max_new_tokens must be at least 1");
  const at::Tensor any_param = model.parameters().front();
  return decode_loop(
      model,
      Source{.input_ids = {},
             .attention_mask = {},
             .input_features = input_features.to(any_param.device(), any_param.scalar_type()),
             .pixel_values = {},
             .padded = false,
             .rows = input_features.size(0)},
      config, decode);
}

namespace {

GenerationResult decode_loop(Model& model, const Source& source, const GenerationConfig& config,
                             const DecodeStep& decode) {
  const bool seq2seq = model.is_encoder_decoder();
  const runtime::InferenceScope inference;
  const ModelShape shape = model.shape();
  const at::Tensor any_param = model.parameters().front();
  const at::TensorOptions ids_options =
      at::TensorOptions().dtype(at::kLong).device(any_param.device());
  const int64_t batch = source.rows;
  const bool padded = source.padded;
  at::Tensor attention_mask = source.attention_mask;  // grows with a decoder-only model's tokens
  const at::Tensor prompt_mask = padded ? source.attention_mask : at::Tensor();

  // A decoder-only model decodes after the prompt: positions count real tokens only (padding
  // positions are 0). An encoder-decoder model encodes its input once and decodes from the
  // decoder prompt or decoder_start_token_id, its cross-attention keys and values projected at
  // the first step (the cache sizes each layer at that step).
  at::Tensor position_ids;
  std::optional<KVCache> cross_cache;
  at::Tensor step_ids = source.input_ids;
  if (seq2seq) {
    const std::vector<int64_t> start = config.decoder_prompt.empty()
                                           ? std::vector<int64_t>{*config.decoder_start_token_id}
                                           : config.decoder_prompt;
    step_ids = at::tensor(start, ids_options).repeat({batch, 1});  // [batch, start]
    cross_cache.emplace(shape.num_layers, batch, shape.num_heads, 0, shape.head_dim,
                        any_param.options());
  } else {
    position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0);
  }
  KVCache cache(shape.num_layers, batch, shape.num_heads, step_ids.size(1) + config.max_new_tokens,
                shape.head_dim, any_param.options());
  at::Tensor sequences = step_ids;  // [batch, prompt or decoder start + steps so far]
  std::vector<bool> unfinished(batch, true);
  std::vector<int64_t> last_step(batch, config.max_new_tokens - 1);  // a row's last token
  SamplingConfig sampling = config.sampling;
  sampling.begin_index = sequences.size(1);
  TokenChooser chooser(sampling);
  std::vector<at::Tensor> generated;
  for (int64_t step = 0; step < config.max_new_tokens; ++step) {
    ForwardInputs inputs{.cache = &cache, .logits_to_keep = 1};  // the next token needs the last
    if (seq2seq) {  // the encoder at the first step only
      if (step == 0) {
        inputs.input_ids = source.input_ids;
        inputs.input_features = source.input_features;
        inputs.pixel_values = source.pixel_values;
      }
      inputs.attention_mask = prompt_mask;
      inputs.decoder_input_ids = step_ids;
      inputs.cross_cache = &*cross_cache;
    } else {
      inputs.input_ids = step_ids;
      if (step == 0) inputs.pixel_values = source.pixel_values;
      inputs.attention_mask = padded ? attention_mask : at::Tensor();
      inputs.position_ids = position_ids;
    }
    const at::Tensor logits = decode.logits(inputs);  // [batch, vocab] or undefined
    at::Tensor next = logits.defined() ? chooser.next(logits, sequences)
                                       : at::empty({batch}, ids_options);  // [batch]
    decode.share(next);
    // Finished rows get the pad token; the rest are checked for their end.
    const at::Tensor chosen = next.cpu();
    std::vector<int64_t> tokens(chosen.data_ptr<int64_t>(), chosen.data_ptr<int64_t>() + batch);
    std::vector<bool> stop(batch, false);
    for (int64_t row = 0; row < batch; ++row) {
      if (!unfinished[row]) tokens[row] = config.pad_token_id;
    }
    if (config.on_step) config.on_step(tokens, stop);
    for (int64_t row = 0; row < batch; ++row) {
      if (unfinished[row] && (config.is_eos(tokens[row]) || stop[row])) {
        unfinished[row] = false;
        last_step[row] = step;
      }
    }
    next = at::tensor(tokens, ids_options);
    generated.push_back(next);
    sequences = at::cat({sequences, next.unsqueeze(1)}, 1);
    if (std::none_of(unfinished.begin(), unfinished.end(), [](bool u) { return u; })) break;
    step_ids = next.unsqueeze(1);  // [batch, 1]
    if (!seq2seq) {
      position_ids = position_ids.select(1, -1).unsqueeze(1) + 1;  // [batch, 1]
      if (padded) attention_mask = at::cat({attention_mask, at::ones_like(step_ids)}, 1);
    }
  }

  GenerationResult result;
  const at::Tensor new_ids = at::stack(generated, 1).cpu();  // [batch, steps]
  result.sequences = sequences.cpu();
  auto ids = new_ids.accessor<int64_t, 2>();
  for (int64_t row = 0; row < batch; ++row) {
    std::vector<int64_t> tokens;
    for (int64_t step = 0; step < new_ids.size(1) && step <= last_step[row]; ++step) {
      tokens.push_back(ids[row][step]);
    }
    result.new_tokens.push_back(std::move(tokens));
  }
  return result;
}

}  // namespace

}  // namespace shardformer
