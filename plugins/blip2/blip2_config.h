// BLIP-2's config (HF Blip2Config): the vision encoder's, the Q-Former's and the language
// model's (OPT, or T5 with use_decoder_only_language_model false) nested configs, each key read
// or refused by name.
#pragma once

#include "opt_model.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"
#include "t5_config.h"

#include <cstdint>
#include <optional>

namespace shardformer::blip2 {

struct Blip2VisionConfig {
  int64_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
  int64_t image_size, patch_size;  // images of 3 channels (HF's convolution takes 3)
  double layer_norm_eps, attention_dropout;
  bool qkv_bias;
  layers::Activation hidden_act;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

struct Blip2QFormerConfig {
  int64_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
  int64_t cross_attention_frequency, encoder_hidden_size;
  double layer_norm_eps, hidden_dropout_prob, attention_probs_dropout_prob;
  bool use_qformer_text_input;  // the text branch's weights, which captioning does not read
  layers::Activation hidden_act;

  bool cross_attends(int64_t layer) const { return layer % cross_attention_frequency == 0; }
};

struct Blip2Config {
  Blip2VisionConfig vision;
  Blip2QFormerConfig qformer;
  std::optional<opt::OPTConfig> opt;          // the decoder-only language model
  std::optional<t5::T5Config> t5;             // or the encoder-decoder one (flan-T5's BLIP-2)
  int64_t text_hidden_size, text_vocab_size;  // the language model's token embedding
  int64_t num_query_tokens, image_token_index;

  static Blip2Config from(const HFConfig& config);
};

}  // namespace shardformer::blip2
