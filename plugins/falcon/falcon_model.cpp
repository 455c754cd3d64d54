// Falcon's config and forward pass, as in HF's modeling_falcon.py.
#include "falcon_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/parallel_residual.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::falcon {

FalconConfig FalconConfig::from(const HFConfig& c) {
  FalconConfig f{};
  c.require(c.model_type() == "falcon",
            "model_type '" + c.model_type() + "' is not a Falcon model");
  f.vocab_size = c.get_int("vocab_size");
  const std::optional<int64_t> n_embed = c.get_optional_int("n_embed");  // HF's older name
  f.hidden_size = n_embed ? *n_embed : c.get_int("hidden_size");
  f.num_hidden_layers = c.get_int("num_hidden_layers");
  f.num_attention_heads = c.get_int("num_attention_heads");
  c.require(f.num_attention_heads > 0 && f.hidden_size % f.num_attention_heads == 0,
            "hidden_size must divide by num_attention_heads");
  const bool new_architecture = c.get_bool("new_decoder_architecture", false);
  const bool multi_query = c.get_bool("multi_query", true);
  const std::optional<int64_t> kv = c.get_optional_int("num_kv_heads");
  // HF: the grouped layout reads num_kv_heads; the older one is multi-query (one KV head) or
  // one [q k v] per head, whatever num_kv_heads says.
  f.num_kv_heads = new_architecture ? kv.value_or(f.num_attention_heads)
                   : multi_query    ? 1
                                    : f.num_attention_heads;
  c.require(new_architecture || multi_query || !kv || *kv == f.num_attention_heads,
            "num_kv_heads must equal num_attention_heads without multi_query or "
            "new_decoder_architecture (HF's key and value reshapes need it)");
  c.require(f.num_kv_heads > 0 && f.num_attention_heads % f.num_kv_heads == 0,
            "num_attention_heads must be a multiple of num_kv_heads");
  f.parallel_attn = c.get_bool("parallel_attn", true);
  c.require(!new_architecture || f.parallel_attn,
            "new_decoder_architecture without parallel_attn (HF's layer has no MLP norm then)");
  const int64_t norms =
      c.get_optional_int("num_ln_in_parallel_attn").value_or(new_architecture ? 2 : 1);
  c.require(norms == 1 || (norms == 2 && new_architecture),
            "num_ln_in_parallel_attn must be 1, or 2 with new_decoder_architecture");
  f.two_norms = new_architecture && norms == 2;
  f.alibi = c.get_bool("alibi", false);
  f.bias = c.get_bool("bias", false);
  f.ffn_hidden_size = c.get_optional_int("ffn_hidden_size").value_or(4 * f.hidden_size);
  f.activation = layers::config_activation(c, "activation", "gelu");
  f.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-5);
  f.hidden_dropout = c.get_probability("hidden_dropout", 0.0);
  f.attention_dropout = c.get_probability("attention_dropout", 0.0);
  f.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  c.require(f.vocab_size > 0 && f.num_hidden_layers > 0 && f.ffn_hidden_size > 0,
            "sizes must be positive");
  // Falcon-7B's config.json carries it; HF's Falcon never reads it.
  c.ignore({"apply_residual_connection_post_layernorm"});
  if (f.alibi) {  // HF writes rope settings for every Falcon and reads them for rotary only
    c.ignore({"rope_parameters", "rope_theta", "rope_scaling", "max_position_embeddings"});
  }
  return f;
}

FalconDecoderLayer::FalconDecoderLayer(const BuildContext& ctx, const FalconConfig& c,
                                       int64_t layer_idx)
    : parallel_(c.parallel_attn) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_epsilon));
  };
  attention_norm_ = norm(c.two_norms ? "ln_attn" : "input_layernorm");
  if (c.two_norms) mlp_norm_ = norm("ln_mlp");
  if (!parallel_) mlp_norm_ = norm("post_attention_layernorm");
  self_attention_ = register_module(
      "self_attention",
      std::make_shared<layers::FusedQKVAttention>(
          ctx.child("self_attention"),
          layers::FusedQKVAttentionOptions{
              .hidden_size = c.hidden_size,
              .num_heads = c.num_attention_heads,
              .num_kv_heads = c.num_kv_heads,
              .head_dim = c.head_dim(),
              .qkv_bias = c.bias,
              .out_bias = c.bias,
              .dropout = c.alibi ? c.attention_dropout : 0.0},  // HF: the ALiBi path only
          layer_idx));
  mlp_ = register_module(
      "mlp", std::make_shared<layers::MLP>(
                 ctx.child("mlp"), layers::MLPOptions{.hidden_size = c.hidden_size,
                                                      .intermediate_size = c.ffn_hidden_size,
                                                      .activation = c.activation,
                                                      .bias = c.bias}));
  attention_out_dropout_ = register_module(
      "attention_out_dropout",
      std::make_shared<layers::Dropout>(ctx.child("attention_out_dropout"), c.attention_dropout));
  out_dropout_ = register_module(
      "out_dropout", std::make_shared<layers::Dropout>(ctx.child("out_dropout"), c.hidden_dropout));
}

at::Tensor FalconDecoderLayer::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum FalconDecoderLayer::forward(const layers::ResidualSum& in,
                                                const layers::AttentionStep& step,
                                                const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const at::Tensor a = in.normed.defined() ? in.normed : attention_norm_->forward(x);
  if (!parallel_) {
    return layers::sequential_residual(*self_attention_, a, step, *mlp_norm_, *mlp_, x, next,
                                       attention_out_dropout_.get(), out_dropout_.get());
  }
  const at::Tensor m = mlp_norm_ ? mlp_norm_->forward(x) : a;
  if (!out_dropout_->active()) {
    return layers::parallel_residual(*self_attention_, a, step, *mlp_, m, x, next);
  }
  // Training with dropout: HF drops out attention + MLP together, x + dropout(attn + mlp).
  const at::Tensor y = out_dropout_->forward(self_attention_->forward(a, step) + mlp_->forward(m),
                                             step.sequence.get());
  if (next == nullptr) return {x + y, at::Tensor()};
  auto [sum, normed] = next->add_forward(y, x);
  return {std::move(sum), std::move(normed)};
}

FalconModel::FalconModel(const BuildContext& ctx, const FalconConfig& config,
                         bool embedding_on_last_stage)
    : config_(config) {
  bind(ctx);
  if (config.alibi) {
    ctx.refuse_sequence_parallelism(
        "Falcon with ALiBi (alibi = true)",
        "its biases span the whole sequence and every head (the rotary layouts run under it)");
    slopes_ = layers::alibi_slopes(config.num_attention_heads);
  } else {
    rotary_.emplace(ctx.config(), config.head_dim());
  }
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    word_embeddings_ = register_module(
        "word_embeddings", layers::make_embedding(ctx.child("word_embeddings"), config.vocab_size,
                                                  config.hidden_size));
  }
  h_ = layers::LayerStack<FalconDecoderLayer>(
      *this, ctx, "h", config.num_hidden_layers,
      [&](const auto& c, int64_t i) { return std::make_shared<FalconDecoderLayer>(c, config, i); });
  if (last) {
    ln_f_ = register_module(
        "ln_f", std::make_shared<layers::LayerNorm>(ctx.child("ln_f"), config.hidden_size,
                                                    config.layer_norm_epsilon));
  }
}

ModelShape FalconModel::shape() const {
  return ModelShape{.num_layers = config_.num_hidden_layers,
                    .num_heads = h_.front()->attention().num_kv_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .max_positions = 0};  // rotary or ALiBi: no position table
}

at::Tensor FalconModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step =
      layers::forward_step(inputs, h_.first_layer(chunk), {}, sequence_parallelism());
  at::Tensor x = starts_model(chunk) ? step.split(word_embeddings_->forward(inputs.input_ids))
                                     : layers::stage_input(inputs);  // [batch, seq, hidden]
  layers::AttentionStep layer_step{
      .mask = step.mask, .causal = step.causal, .cache = inputs.cache, .sequence = step.sequence};
  if (config_.alibi) {
    // HF adds alibi / sqrt(head_dim) to the scores already scaled by 1 / sqrt(head_dim).
    const at::Tensor padding = layers::key_padding(inputs, step, x.size(0), x.size(1));
    const layers::FusedQKVAttention& attention = h_.front()->attention();
    layer_step.bias = layers::alibi_bias(slopes_, attention.first_head(), attention.num_heads(),
                                         padding, x.scalar_type()) /
                      std::sqrt(static_cast<double>(config_.head_dim()));
  } else {
    const auto [cos, sin] = rotary_->cos_sin(step.positions, x.scalar_type());  // [b, s, d]
    layer_step.cos = step.for_layers(cos);
    layer_step.sin = step.for_layers(sin);
  }
  x = h_.forward(chunk, x, layer_step);
  return ends_model(chunk) ? step.join(ln_f_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::falcon
