// The Llama-family forward pass, as in HF's modeling_llama.py (and Mistral's sliding window,
// Qwen2's QKV bias, Qwen3's q / k norms, GLM's fused MLP and interleaved partial rotary, GLM-4's
// sandwich norms by flags).
#include "llama_model.h"

#include "shardformer/layers/forward_step.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::llama {

DecoderLayer::DecoderLayer(const BuildContext& ctx, const LlamaConfig& c, int64_t layer_idx)
    : sliding_(c.sliding_layers[layer_idx]) {
  const auto norm = [&](const char* name) {
    return std::make_shared<layers::RMSNorm>(ctx.child(name), c.hidden_size, c.rms_norm_eps);
  };
  input_layernorm_ = register_module("input_layernorm", norm("input_layernorm"));
  self_attn_ = register_module(
      "self_attn",
      std::make_shared<layers::SelfAttention>(
          ctx.child("self_attn"),
          layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                       .num_heads = c.num_attention_heads,
                                       .num_kv_heads = c.num_key_value_heads,
                                       .head_dim = c.head_dim,
                                       .qkv_bias = c.attention_bias,
                                       .out_bias = c.out_bias,
                                       .dropout = c.attention_dropout,
                                       .qk_norm_eps = c.qk_norm ? c.rms_norm_eps : 0.0},
          layer_idx));
  post_attention_layernorm_ =
      register_module("post_attention_layernorm", norm("post_attention_layernorm"));
  mlp_ = register_module("mlp", std::make_shared<layers::GatedMLP>(
                                    ctx.child("mlp"), c.hidden_size, c.intermediate_size,
                                    c.hidden_act, c.mlp_bias, /*fused_gate_up=*/c.glm));
  if (c.sandwich_norms) {
    post_self_attn_layernorm_ =
        register_module("post_self_attn_layernorm", norm("post_self_attn_layernorm"));
    post_mlp_layernorm_ = register_module("post_mlp_layernorm", norm("post_mlp_layernorm"));
  }
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const LlamaStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum DecoderLayer::forward(const layers::ResidualSum& in, const LlamaStep& step,
                                          const layers::ResidualNorm* next) {
  // h = x + attention(norm(x)), with post_attention_layernorm(h) computed in the same pass;
  // then h + mlp(norm(h)), with the next layer's input_layernorm of it.
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const at::Tensor a = in.normed.defined() ? in.normed : input_layernorm_->forward(x);
  const layers::AttentionStep& attention_step = sliding_ ? step.sliding : step.full;
  if (post_self_attn_layernorm_) {
    // GLM-4: h = x + norm(attn(a)); h + norm(mlp(post_attention_layernorm(h))). The outputs'
    // norms come between the sublayers and the residual adds, so nothing fuses with them.
    const at::Tensor h =
        x + post_self_attn_layernorm_->forward(self_attn_->forward(a, attention_step));
    const at::Tensor m =
        post_mlp_layernorm_->forward(mlp_->forward(post_attention_layernorm_->forward(h)));
    if (next == nullptr) return {h + m, at::Tensor()};
    auto [sum, normed] = next->add_forward(m, h);
    return {std::move(sum), std::move(normed)};
  }
  const layers::ResidualSum h =
      self_attn_->forward_residual(a, attention_step, x, post_attention_layernorm_.get());
  return mlp_->forward_residual(h.normed, h.sum, next);
}

LlamaModel::LlamaModel(const BuildContext& ctx, const LlamaConfig& config,
                       bool embedding_on_last_stage)
    : config_(config), rotary_(ctx.config(), config.head_dim, config.rotary) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    embed_tokens_ = register_module(
        "embed_tokens",
        layers::make_embedding(ctx.child("embed_tokens"), config.vocab_size, config.hidden_size));
  }
  layers_ = layers::LayerStack<DecoderLayer>(
      *this, ctx, "layers", config.num_hidden_layers,
      [&](const auto& c, int64_t i) { return std::make_shared<DecoderLayer>(c, config, i); });
  if (last) {
    norm_ =
        register_module("norm", std::make_shared<layers::RMSNorm>(
                                    ctx.child("norm"), config.hidden_size, config.rms_norm_eps));
  }
}

ModelShape LlamaModel::shape() const {
  return ModelShape{.num_layers = config_.num_hidden_layers,
                    .num_heads = layers_.front()->num_kv_heads(),
                    .head_dim = config_.head_dim,
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .max_positions = 0};  // rotary: no hard limit
}

at::Tensor LlamaModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const int64_t first = layers_.first_layer(chunk);
  const layers::ForwardStep step = layers::forward_step(inputs, first, {}, sequence_parallelism());
  at::Tensor x = starts_model(chunk) ? step.split(embed_tokens_->forward(inputs.input_ids))
                                     : layers::stage_input(inputs);  // [batch, seq, hidden]
  LlamaStep layer_step{.full = {.mask = step.mask,
                                .causal = step.causal,
                                .interleaved = rotary_.interleaved(),
                                .cache = inputs.cache,
                                .sequence = step.sequence}};
  const auto [cos, sin] = rotary_.cos_sin(step.positions, x.scalar_type());  // [batch, seq, d]
  layer_step.full.cos = step.for_layers(cos);
  layer_step.full.sin = step.for_layers(sin);
  layer_step.sliding = layer_step.full;
  const auto& layers = layers_.chunk(chunk);
  if (std::any_of(layers.begin(), layers.end(), [](const auto& l) { return l->sliding(); })) {
    layer_step.sliding = layers::with_window(layer_step.full, inputs, first, config_.sliding_window,
                                             sequence_parallelism());
  }
  x = layers_.forward(chunk, x, layer_step);
  // The final norm runs on this rank's tokens; the whole sequence is gathered once, normed.
  return ends_model(chunk) ? step.join(norm_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::llama
