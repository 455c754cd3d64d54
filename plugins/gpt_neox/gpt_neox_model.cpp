// GPT-NeoX's config and forward pass, as in HF's modeling_gpt_neox.py.
#include "gpt_neox_model.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/parallel_residual.h"

#include <ATen/ATen.h>

namespace shardformer::gpt_neox {
namespace {

// HF reads rotary_pct and rotary_emb_base from configs older than rope_parameters; without
// either, a quarter of each head rotates.
layers::RotaryOptions rotary_options() {
  return {.theta_key = "rotary_emb_base", .partial_key = "rotary_pct", .partial = 0.25};
}

}  // namespace

GPTNeoXConfig GPTNeoXConfig::from(const HFConfig& c) {
  GPTNeoXConfig g{};
  c.require(c.model_type() == "gpt_neox",
            "model_type '" + c.model_type() + "' is not a GPT-NeoX model");
  g.vocab_size = c.get_int("vocab_size");
  g.hidden_size = c.get_int("hidden_size");
  g.num_hidden_layers = c.get_int("num_hidden_layers");
  g.num_attention_heads = c.get_int("num_attention_heads");
  g.intermediate_size = c.get_int("intermediate_size");
  g.layer_norm_eps = c.get_double("layer_norm_eps", 1e-5);
  g.attention_dropout = c.get_probability("attention_dropout", 0.0);
  g.hidden_dropout = c.get_probability("hidden_dropout", 0.0);
  g.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  g.use_parallel_residual = c.get_bool("use_parallel_residual", true);
  g.attention_bias = c.get_bool("attention_bias", true);
  g.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  c.require(g.num_attention_heads > 0 && g.hidden_size % g.num_attention_heads == 0,
            "hidden_size must divide by num_attention_heads");
  c.require(g.vocab_size > 0 && g.intermediate_size > 0 && g.num_hidden_layers > 0,
            "sizes must be positive");
  // Read by HF's sequence- and token-classification heads only, which this plugin does not build.
  c.ignore({"classifier_dropout"});
  return g;
}

GPTNeoXLayer::GPTNeoXLayer(const BuildContext& ctx, const GPTNeoXConfig& c, int64_t layer_idx)
    : parallel_residual_(c.use_parallel_residual) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  const auto dropout = [&](const char* name) {
    return register_module(name,
                           std::make_shared<layers::Dropout>(ctx.child(name), c.hidden_dropout));
  };
  input_layernorm_ = norm("input_layernorm");
  post_attention_layernorm_ = norm("post_attention_layernorm");
  post_attention_dropout_ = dropout("post_attention_dropout");
  post_mlp_dropout_ = dropout("post_mlp_dropout");
  const BuildContext attention = ctx.child("attention");
  // Buffers of older transformers versions (the causal mask, rotary frequencies): recomputed.
  for (const char* buffer : {"bias", "masked_bias", "rotary_emb.inv_freq"}) {
    attention.skip(buffer, "a buffer HF recomputes");
  }
  // query_key_value's rows are [head 0: q k v, head 1: q k v, ...]: group 1.
  attention_ = register_module(
      "attention", std::make_shared<layers::FusedQKVAttention>(
                       attention,
                       layers::FusedQKVAttentionOptions{.hidden_size = c.hidden_size,
                                                        .num_heads = c.num_attention_heads,
                                                        .head_dim = c.head_dim(),
                                                        .qkv_bias = c.attention_bias,
                                                        .out_bias = c.attention_bias,
                                                        .dropout = c.attention_dropout},
                       layer_idx));
  mlp_ = register_module(
      "mlp", std::make_shared<layers::MLP>(
                 ctx.child("mlp"), layers::MLPOptions{.hidden_size = c.hidden_size,
                                                      .intermediate_size = c.intermediate_size,
                                                      .activation = c.hidden_act}));
}

at::Tensor GPTNeoXLayer::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum GPTNeoXLayer::forward(const layers::ResidualSum& in,
                                          const layers::AttentionStep& step,
                                          const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const at::Tensor a = in.normed.defined() ? in.normed : input_layernorm_->forward(x);
  if (parallel_residual_) {  // x + attention(ln1(x)) + mlp(ln2(x))
    return layers::parallel_residual(*attention_, a, step, *mlp_,
                                     post_attention_layernorm_->forward(x), x, next,
                                     post_attention_dropout_.get(), post_mlp_dropout_.get());
  }
  return layers::sequential_residual(*attention_, a, step, *post_attention_layernorm_, *mlp_, x,
                                     next, post_attention_dropout_.get(), post_mlp_dropout_.get());
}

GPTNeoXModel::GPTNeoXModel(const BuildContext& ctx, const GPTNeoXConfig& config,
                           bool embedding_on_last_stage)
    : config_(config), rotary_(ctx.config(), config.head_dim(), rotary_options()) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    embed_in_ = register_module(
        "embed_in",
        layers::make_embedding(ctx.child("embed_in"), config.vocab_size, config.hidden_size));
  }
  emb_dropout_ = register_module(
      "emb_dropout",
      std::make_shared<layers::Dropout>(ctx.child("emb_dropout"), config.hidden_dropout));
  layers_ = layers::LayerStack<GPTNeoXLayer>(
      *this, ctx, "layers", config.num_hidden_layers,
      [&](const auto& c, int64_t i) { return std::make_shared<GPTNeoXLayer>(c, config, i); });
  if (last) {
    final_layer_norm_ = register_module(
        "final_layer_norm",
        std::make_shared<layers::LayerNorm>(ctx.child("final_layer_norm"), config.hidden_size,
                                            config.layer_norm_eps));
  }
}

ModelShape GPTNeoXModel::shape() const {
  return ModelShape{.num_layers = config_.num_hidden_layers,
                    .num_heads = layers_.front()->attention().num_kv_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .max_positions = 0};  // rotary: no hard limit
}

at::Tensor GPTNeoXModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step =
      layers::forward_step(inputs, layers_.first_layer(chunk), {}, sequence_parallelism());
  at::Tensor x = starts_model(chunk)
                     ? emb_dropout_->forward(step.split(embed_in_->forward(inputs.input_ids)),
                                             step.sequence.get())
                     : layers::stage_input(inputs);  // [batch, seq, hidden]
  layers::AttentionStep layer_step{
      .mask = step.mask, .causal = step.causal, .cache = inputs.cache, .sequence = step.sequence};
  const auto [cos, sin] = rotary_.cos_sin(step.positions, x.scalar_type());  // [batch, seq, r]
  layer_step.cos = step.for_layers(cos);
  layer_step.sin = step.for_layers(sin);
  x = layers_.forward(chunk, x, layer_step);
  return ends_model(chunk) ? step.join(final_layer_norm_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::gpt_neox
