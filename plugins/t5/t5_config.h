// T5's config.json (v1.0 with ReLU and the tied head's d_model^-0.5 scale, v1.1 / flan-T5 with
// gated GELU and an untied head), every key used or refused by name.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

namespace shardformer::t5 {

struct T5Config {
  int64_t vocab_size, d_model, d_kv, d_ff, num_heads;
  int64_t num_layers, num_decoder_layers;  // the encoder's and the decoder's
  int64_t relative_attention_num_buckets, relative_attention_max_distance;
  double dropout_rate, layer_norm_epsilon;
  layers::Activation dense_act_fn;
  bool is_gated_act;           // wi_0 / wi_1 (feed_forward_proj "gated-...")
  bool scale_decoder_outputs;  // the decoder's output times d_model^-0.5 before the head
  int64_t decoder_start_token_id, pad_token_id;  // decoder inputs shifted from the labels

  static T5Config from(const HFConfig& config);
};

}  // namespace shardformer::t5
