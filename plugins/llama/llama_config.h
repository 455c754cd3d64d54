// The config.json of Llama, Mistral, Qwen2, Qwen3, GLM and GLM-4 (and ChatGLM2 / ChatGLM3's
// original one): one decoder with flags. Every key that changes the computation is read here;
// unsupported values are refused naming the key.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/rotary.h"

#include <string>
#include <vector>

namespace shardformer::llama {

struct LlamaConfig {
  std::string model_type;  // llama, mistral, qwen2, qwen3, glm, glm4, chatglm
  int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
  int64_t num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings;
  double rms_norm_eps, attention_dropout;
  layers::Activation hidden_act;
  bool attention_bias;  // biases of q / k / v (Qwen2: always) and o_proj (Llama, Qwen3)
  bool out_bias;        // o_proj's bias (Llama's attention_bias; Qwen2 has none)
  bool mlp_bias;
  bool qk_norm;  // Qwen3: RMSNorm of each query and key head before rotary
  bool glm;      // GLM, GLM-4: fused gate_up_proj, interleaved partial rotary (half by default)
  bool sandwich_norms;  // GLM-4: post_self_attn_layernorm, post_mlp_layernorm on each output
  bool tie_word_embeddings;
  int64_t sliding_window;            // keys a query sees on sliding layers (Mistral, Qwen2)
  std::vector<bool> sliding_layers;  // per layer: sliding window or full attention
  layers::RotaryOptions rotary;      // GLM: half of each head, interleaved pairs

  static LlamaConfig from(const HFConfig& config);
};

}  // namespace shardformer::llama
