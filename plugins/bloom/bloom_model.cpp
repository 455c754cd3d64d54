// BLOOM's config and forward pass, as in HF's modeling_bloom.py.
#include "bloom_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::bloom {
BloomConfig BloomConfig::from(const HFConfig& c) {
  BloomConfig b{};
  b.vocab_size = c.get_int("vocab_size");
  b.hidden_size = c.get_int("hidden_size", c.get_int("n_embed", 64));
  b.n_layer = c.get_int("n_layer");
  b.n_head = c.get_int("n_head");
  b.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-5);
  b.hidden_dropout = c.get_probability("hidden_dropout", 0.0);
  b.attention_dropout = c.get_probability("attention_dropout", 0.0);
  b.apply_residual_connection_post_layernorm =
      c.get_bool("apply_residual_connection_post_layernorm", false);
  b.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  c.require(b.hidden_size % b.n_head == 0, "hidden_size must divide by n_head");
  c.require(!c.get_bool("slow_but_exact", false),
            "slow_but_exact = true (Megatron's sliced linear layers) is not supported");
  c.ignore({"pretraining_tp"});  // used by HF only together with slow_but_exact
  return b;
}

BloomBlock::BloomBlock(const BuildContext& ctx, const BloomConfig& c, int64_t layer_idx)
    : residual_from_norm_(c.apply_residual_connection_post_layernorm) {
  const auto norm = [&](const char* name) {
    return std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                               c.layer_norm_epsilon);
  };
  input_layernorm_ = register_module("input_layernorm", norm("input_layernorm"));
  // query_key_value's rows are [head 0: q k v, head 1: q k v, ...]: group 1.
  self_attention_ = register_module(
      "self_attention", std::make_shared<layers::FusedQKVAttention>(
                            ctx.child("self_attention"),
                            layers::FusedQKVAttentionOptions{.hidden_size = c.hidden_size,
                                                             .num_heads = c.n_head,
                                                             .head_dim = c.head_dim(),
                                                             .dropout = c.attention_dropout},
                            layer_idx));
  post_attention_layernorm_ =
      register_module("post_attention_layernorm", norm("post_attention_layernorm"));
  const BuildContext mlp = ctx.child("mlp");
  if (layers::split_pair(mlp.child("dense_h_to_4h"), mlp.child("dense_4h_to_h"))) {
    ctx.divide_by_tp(4 * c.hidden_size, "4 x hidden_size");
  }
  auto mlp_module = register_module("mlp", std::make_shared<torch::nn::Module>());
  dense_h_to_4h_ = mlp_module->register_module(
      "dense_h_to_4h",
      layers::make_linear(mlp.child("dense_h_to_4h"), c.hidden_size, 4 * c.hidden_size));
  dense_4h_to_h_ = mlp_module->register_module(
      "dense_4h_to_h",
      layers::make_linear(mlp.child("dense_4h_to_h"), 4 * c.hidden_size, c.hidden_size));
  attn_out_dropout_ = register_module(
      "hidden_dropout",
      std::make_shared<layers::Dropout>(ctx.child("hidden_dropout"), c.hidden_dropout));
  mlp_dropout_ = mlp_module->register_module(
      "hidden_dropout",
      std::make_shared<layers::Dropout>(mlp.child("hidden_dropout"), c.hidden_dropout));
}

at::Tensor BloomBlock::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum BloomBlock::forward(const layers::ResidualSum& in,
                                        const layers::AttentionStep& step,
                                        const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const at::Tensor normed = in.normed.defined() ? in.normed : input_layernorm_->forward(x);
  // h = residual + dropout(attention(normed)), with post_attention_layernorm(h) in the same pass;
  // the residual is the normed input under apply_residual_connection_post_layernorm.
  const layers::ResidualSum h =
      self_attention_->forward_residual(normed, step, residual_from_norm_ ? normed : x,
                                        post_attention_layernorm_.get(), attn_out_dropout_.get());
  const at::Tensor f =  // [b, s, 4 hidden/tp]
      layers::apply_activation(layers::Activation::kGeluNew, dense_h_to_4h_->forward(h.normed));
  return layers::add_to_residual(*dense_4h_to_h_, f, mlp_dropout_.get(),
                                 residual_from_norm_ ? h.normed : h.sum, next);
}

BloomModel::BloomModel(const BuildContext& ctx, const BloomConfig& config,
                       bool embedding_on_last_stage)
    : config_(config), slopes_(layers::alibi_slopes(config.n_head)) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    word_embeddings_ = register_module(
        "word_embeddings", layers::make_embedding(ctx.child("word_embeddings"), config.vocab_size,
                                                  config.hidden_size));
  }
  const auto norm = [&](const char* name) {
    return std::make_shared<layers::LayerNorm>(ctx.child(name), config.hidden_size,
                                               config.layer_norm_epsilon);
  };
  if (first) {
    word_embeddings_layernorm_ =
        register_module("word_embeddings_layernorm", norm("word_embeddings_layernorm"));
  }
  h_ = layers::LayerStack<BloomBlock>(
      *this, ctx, "h", config.n_layer,
      [&](const auto& c, int64_t i) { return std::make_shared<BloomBlock>(c, config, i); });
  if (last) ln_f_ = register_module("ln_f", norm("ln_f"));
}

ModelShape BloomModel::shape() const {
  return ModelShape{.num_layers = config_.n_layer,
                    .num_heads = h_.front()->attention().num_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .max_positions = 0};  // ALiBi: no position table
}

at::Tensor BloomModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step = layers::forward_step(inputs, h_.first_layer(chunk), {});
  at::Tensor x =
      starts_model(chunk)
          ? word_embeddings_layernorm_->forward(word_embeddings_->forward(inputs.input_ids))
          : layers::stage_input(inputs);  // [batch, seq, hidden]
  const at::Tensor padding = layers::key_padding(inputs, step, x.size(0), x.size(1));
  const layers::FusedQKVAttention& attention = h_.front()->attention();
  const layers::AttentionStep bloom{
      .mask = step.mask,
      .causal = step.causal,
      .bias = layers::alibi_bias(slopes_, attention.first_head(), attention.num_heads(), padding,
                                 x.scalar_type()),
      .cache = inputs.cache};
  x = h_.forward(chunk, x, bloom);
  return ends_model(chunk) ? ln_f_->forward(x) : x;
}

}  // namespace shardformer::bloom
