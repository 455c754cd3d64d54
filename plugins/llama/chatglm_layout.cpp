// ChatGLM's original tensor names as views of GLM's: what HF's convert_glm_weights_to_hf.py
// renames, with query_key_value's rows [q (heads x d); k (groups x d); v (groups x d)] split.
#include "chatglm_layout.h"

namespace shardformer::llama {

std::vector<TensorView> chatglm_views(const LlamaConfig& c, const Checkpoint& checkpoint) {
  std::vector<TensorView> views{
      {.name = "model.embed_tokens.weight",
       .source = "transformer.embedding.word_embeddings.weight"},
      {.name = "model.norm.weight", .source = "transformer.encoder.final_layernorm.weight"}};
  if (checkpoint.contains("transformer.output_layer.weight")) {
    views.push_back({.name = "lm_head.weight", .source = "transformer.output_layer.weight"});
  }
  const int64_t q_rows = c.num_attention_heads * c.head_dim;
  const int64_t kv_rows = c.num_key_value_heads * c.head_dim;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string from = "transformer.encoder.layers." + std::to_string(i) + ".";
    const std::string to = "model.layers." + std::to_string(i) + ".";
    const auto rename = [&](const std::string& name, const std::string& source) {
      views.push_back({.name = to + name, .source = from + source});
    };
    rename("input_layernorm.weight", "input_layernorm.weight");
    rename("post_attention_layernorm.weight", "post_attention_layernorm.weight");
    rename("self_attn.o_proj.weight", "self_attention.dense.weight");
    rename("mlp.gate_up_proj.weight", "mlp.dense_h_to_4h.weight");
    rename("mlp.down_proj.weight", "mlp.dense_4h_to_h.weight");
    for (const std::string leaf : {"weight", "bias"}) {
      if (leaf == "bias" && !c.attention_bias) continue;
      const std::string qkv = from + "self_attention.query_key_value." + leaf;
      views.push_back({to + "self_attn.q_proj." + leaf, qkv, 0, q_rows});
      views.push_back({to + "self_attn.k_proj." + leaf, qkv, q_rows, kv_rows});
      views.push_back({to + "self_attn.v_proj." + leaf, qkv, q_rows + kv_rows, kv_rows});
    }
  }
  return views;
}

}  // namespace shardformer::llama
