// Reads and validates the Llama-family config.json.
#include "llama_config.h"

#include "shardformer/checkpoint_io/layer_types.h"
#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::llama {
namespace {

// Which layers use the sliding window: layer_types when given, else Mistral's sliding_window on
// every layer, or Qwen's use_sliding_window from max_window_layers on.
std::vector<bool> layers_with_window(const HFConfig& c, const LlamaConfig& l) {
  const bool qwen = l.model_type == "qwen2" || l.model_type == "qwen3";
  const bool use = qwen ? c.get_bool("use_sliding_window", false) : l.sliding_window > 0;
  const int64_t from = qwen ? c.get_int("max_window_layers", 0) : 0;
  std::vector<bool> sliding(static_cast<size_t>(l.num_hidden_layers));
  for (int64_t i = 0; i < l.num_hidden_layers; ++i) sliding[i] = use && i >= from;
  if (auto types = windowed_layers(c, "layer_types", l.num_hidden_layers, "full_attention",
                                   "sliding_attention")) {
    sliding = std::move(*types);
  }
  for (size_t i = 0; i < sliding.size(); ++i) {
    c.require(!sliding[i] || l.sliding_window > 0,
              str("layer ", i, " uses a sliding window but sliding_window is not set"));
  }
  return sliding;
}

// The head width: `key` when given, else hidden_size / num_attention_heads, which must divide.
int64_t head_dim_of(const HFConfig& c, const LlamaConfig& l, const std::string& key) {
  const std::optional<int64_t> given = c.get_optional_int(key);
  c.require(l.num_attention_heads > 0 && (given || l.hidden_size % l.num_attention_heads == 0),
            str("hidden_size must divide by num_attention_heads unless ", key, " is given"));
  return given.value_or(l.hidden_size / l.num_attention_heads);
}

// ChatGLM2 / ChatGLM3's own config.json (model_type chatglm), read as HF's GLM conversion script
// maps it onto GlmConfig; the switches HF's GLM has no code for are refused unless at the value
// that GLM computes.
LlamaConfig chatglm_config(const HFConfig& c) {
  LlamaConfig l{};
  l.model_type = "chatglm";
  l.glm = true;
  l.vocab_size = c.get_int("padded_vocab_size");
  l.hidden_size = c.get_int("hidden_size");
  l.intermediate_size = c.get_int("ffn_hidden_size");
  l.num_hidden_layers = c.get_int("num_layers");
  l.num_attention_heads = c.get_int("num_attention_heads");
  l.num_key_value_heads = c.get_bool("multi_query_attention", false)
                              ? c.get_int("multi_query_group_num")
                              : l.num_attention_heads;
  l.head_dim = head_dim_of(c, l, "kv_channels");
  l.max_position_embeddings = c.get_int("seq_length");
  l.rms_norm_eps = c.get_double("layernorm_epsilon", 1e-5);
  l.attention_dropout = c.get_probability("attention_dropout", 0.0);
  l.hidden_act = layers::Activation::kSilu;  // SwiGLU over dense_h_to_4h's two halves
  l.attention_bias = c.get_bool("add_qkv_bias", false);
  l.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  l.sliding_layers.assign(static_cast<size_t>(std::max<int64_t>(l.num_hidden_layers, 0)), false);
  l.rotary = {.max_positions_key = "seq_length",
              .partial = 0.5,
              .theta = 10000.0 * c.get_double("rope_ratio", 1.0),
              .interleaved = true};
  c.require(c.get_probability("hidden_dropout", 0.0) == 0.0,
            "hidden_dropout > 0 (dropout on each residual branch) is not implemented");
  c.require(!c.get_bool("add_bias_linear", false),
            "add_bias_linear = true (biases of dense, dense_h_to_4h and dense_4h_to_h) is not "
            "implemented");
  c.require(c.get_bool("rmsnorm", true), "rmsnorm = false (LayerNorm) is not implemented");
  c.require(!c.get_bool("apply_residual_connection_post_layernorm", false),
            "apply_residual_connection_post_layernorm = true is not implemented");
  c.require(c.get_bool("post_layer_norm", true),
            "post_layer_norm = false (no final norm) is not implemented");
  c.require(c.get_bool("original_rope", true), "original_rope = false is not implemented");
  c.require(!c.get_bool("fp32_residual_connection", false),
            "fp32_residual_connection = true is not implemented");
  c.require(c.get_int("quantization_bit", 0) == 0,
            "quantization_bit: quantized weights are not implemented");
  c.require(!c.get_optional_int("pre_seq_len"),
            "pre_seq_len: P-tuning v2 prefixes are not implemented");
  // apply_query_key_layer_scaling divides the scores by the layer number and the softmax
  // multiplies it back; the others choose kernels or precision of ChatGLM's own code, or serve
  // its prefixes (pre_seq_len, refused above) and classification head.
  c.ignore({"apply_query_key_layer_scaling", "attention_softmax_in_fp32", "bias_dropout_fusion",
            "prefix_projection", "classifier_dropout"});
  return l;
}

}  // namespace

LlamaConfig LlamaConfig::from(const HFConfig& c) {
  if (c.model_type() == "chatglm") return chatglm_config(c);
  LlamaConfig l{};
  l.model_type = c.model_type();
  c.require(l.model_type == "llama" || l.model_type == "mistral" || l.model_type == "qwen2" ||
                l.model_type == "qwen3" || l.model_type == "glm" || l.model_type == "glm4",
            str("model_type '", l.model_type, "' is not a Llama-family model"));
  l.glm = l.model_type == "glm" || l.model_type == "glm4";
  l.sandwich_norms = l.model_type == "glm4";
  l.vocab_size = c.get_int("vocab_size");
  l.hidden_size = c.get_int("hidden_size");
  l.intermediate_size = c.get_int("intermediate_size");
  l.num_hidden_layers = c.get_int("num_hidden_layers");
  l.num_attention_heads = c.get_int("num_attention_heads");
  l.num_key_value_heads = c.get_int("num_key_value_heads", l.num_attention_heads);
  l.head_dim = head_dim_of(c, l, "head_dim");
  l.max_position_embeddings = c.get_int("max_position_embeddings");
  l.rms_norm_eps = c.get_double("rms_norm_eps", 1e-6);
  l.attention_dropout = c.get_probability("attention_dropout", 0.0);
  l.hidden_act = layers::config_activation(c, "hidden_act", "silu");
  const bool qwen2 = l.model_type == "qwen2";
  l.attention_bias = qwen2 || c.get_bool("attention_bias", l.glm);
  l.out_bias = !qwen2 && !l.glm && l.attention_bias;  // Qwen2 and GLM: q / k / v biases only
  l.mlp_bias = c.get_bool("mlp_bias", false);
  l.qk_norm = l.model_type == "qwen3";
  l.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  l.sliding_window = c.get_optional_int("sliding_window").value_or(0);
  l.sliding_layers = layers_with_window(c, l);
  if (l.glm) l.rotary = {.partial = 0.5, .interleaved = true};
  c.require(l.vocab_size > 0 && l.hidden_size > 0 && l.intermediate_size > 0 &&
                l.num_hidden_layers > 0 && l.num_key_value_heads > 0 && l.head_dim > 0,
            "sizes must be positive");
  c.ignore({"pretraining_tp"});  // a config field HF's modeling code no longer reads
  return l;
}

}  // namespace shardformer::llama
