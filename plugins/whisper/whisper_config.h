// Whisper's config.json, every key used or refused by name (the generation defaults and the
// audio-classification head's keys change no math of the served classes).
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

namespace shardformer::whisper {

struct WhisperConfig {
  int64_t vocab_size, num_mel_bins, d_model;
  int64_t encoder_layers, encoder_attention_heads, encoder_ffn_dim;
  int64_t decoder_layers, decoder_attention_heads, decoder_ffn_dim;
  int64_t max_source_positions, max_target_positions;  // encoder frames / 2, decoder tokens
  int64_t decoder_start_token_id, pad_token_id;
  double dropout, attention_dropout, activation_dropout;
  layers::Activation activation_function;
  bool scale_embedding;  // the decoder's token embeddings times sqrt(d_model)

  static WhisperConfig from(const HFConfig& config);
};

}  // namespace shardformer::whisper
