// OPT's config and forward pass, as in HF's modeling_opt.py.
#include "opt_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::opt {
namespace {

constexpr int64_t kPositionOffset = 2;  // OPT's learned positions start at row 2

}  // namespace

OPTConfig OPTConfig::from(const HFConfig& c) {
  OPTConfig o{};
  o.vocab_size = c.get_int("vocab_size");
  o.hidden_size = c.get_int("hidden_size");
  o.ffn_dim = c.get_int("ffn_dim");
  o.num_hidden_layers = c.get_int("num_hidden_layers");
  o.num_attention_heads = c.get_int("num_attention_heads");
  o.max_position_embeddings = c.get_int("max_position_embeddings");
  o.word_embed_proj_dim = c.get_int("word_embed_proj_dim", o.hidden_size);
  o.pad_token_id = c.get_int("pad_token_id", 1);
  o.do_layer_norm_before = c.get_bool("do_layer_norm_before", true);
  const bool removed = c.get_bool("_remove_final_layer_norm", false);  // old OPT-350m configs
  o.final_layer_norm = o.do_layer_norm_before && !removed;
  o.enable_bias = c.get_bool("enable_bias", true);
  o.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  o.dropout = c.get_probability("dropout", 0.1);
  o.attention_dropout = c.get_probability("attention_dropout", 0.0);
  o.activation = layers::config_activation(c, "activation_function", "relu");
  c.require(c.get_bool("layer_norm_elementwise_affine", true),
            "layer_norm_elementwise_affine = false is not supported");
  c.require(c.get_double("layerdrop", 0.0) == 0.0,
            "layerdrop > 0 (dropping whole layers in training) is not supported");
  c.require(o.hidden_size % o.num_attention_heads == 0,
            "hidden_size must divide by num_attention_heads");
  c.ignore({"init_std"});  // initialisation only
  return o;
}

OPTDecoderLayer::OPTDecoderLayer(const BuildContext& ctx, const OPTConfig& c, int64_t layer_idx)
    : pre_norm_(c.do_layer_norm_before), activation_(c.activation) {
  const int64_t head_dim = c.hidden_size / c.num_attention_heads;
  self_attn_ = register_module(
      "self_attn", std::make_shared<layers::SelfAttention>(
                       ctx.child("self_attn"),
                       layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                                    .num_heads = c.num_attention_heads,
                                                    .num_kv_heads = c.num_attention_heads,
                                                    .head_dim = head_dim,
                                                    .qkv_bias = c.enable_bias,
                                                    .out_bias = c.enable_bias,
                                                    .scale_queries = true,
                                                    .dropout = c.attention_dropout,
                                                    .out_name = "out_proj"},
                       layer_idx));
  const auto norm = [&](const char* name) {
    return std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size, 1e-5);
  };
  self_attn_layer_norm_ = register_module("self_attn_layer_norm", norm("self_attn_layer_norm"));
  if (layers::split_pair(ctx.child("fc1"), ctx.child("fc2")))
    ctx.divide_by_tp(c.ffn_dim, "ffn_dim");
  fc1_ = register_module("fc1", layers::make_linear(ctx.child("fc1"), c.hidden_size, c.ffn_dim,
                                                    {.bias = c.enable_bias}));
  fc2_ = register_module("fc2", layers::make_linear(ctx.child("fc2"), c.ffn_dim, c.hidden_size,
                                                    {.bias = c.enable_bias}));
  final_layer_norm_ = register_module("final_layer_norm", norm("final_layer_norm"));
  // Both act on replicated activations (after the row-parallel all-reduce).
  attn_dropout_ =
      register_module("attn_out_dropout",
                      std::make_shared<layers::Dropout>(ctx.child("attn_out_dropout"), c.dropout));
  ffn_dropout_ = register_module(
      "ffn_dropout", std::make_shared<layers::Dropout>(ctx.child("ffn_dropout"), c.dropout));
}

at::Tensor OPTDecoderLayer::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum OPTDecoderLayer::forward(const layers::ResidualSum& in,
                                             const layers::AttentionStep& step,
                                             const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  // Pre-LN: h = x + dropout(attn(ln(x))), with final_layer_norm(h) (the MLP's input) in the same
  // pass. Post-LN: h = self_attn_layer_norm(x + dropout(attn(x))), the MLP's input too.
  const layers::ResidualSum a = self_attn_->forward_residual(
      !pre_norm_            ? x
      : in.normed.defined() ? in.normed
                            : self_attn_layer_norm_->forward(x),
      step, x, pre_norm_ ? final_layer_norm_.get() : self_attn_layer_norm_.get(),
      attn_dropout_.get());
  const at::Tensor& h = pre_norm_ ? a.sum : a.normed;  // [batch, seq, hidden]
  const at::Tensor f = layers::apply_activation(activation_, fc1_->forward(a.normed));
  if (pre_norm_) return layers::add_to_residual(*fc2_, f, ffn_dropout_.get(), h, next);
  // Post-LN: final_layer_norm(h + dropout(fc2(f))) is the output (no layer after takes a norm).
  return {layers::add_to_residual(*fc2_, f, ffn_dropout_.get(), h, final_layer_norm_.get()).normed,
          at::Tensor()};
}

OPTModel::OPTModel(const BuildContext& model_ctx, const OPTConfig& c, bool embedding_on_last_stage)
    : config_(c) {
  bind(model_ctx);
  const BuildContext ctx = model_ctx.child("decoder");
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  auto decoder = register_module("decoder", std::make_shared<torch::nn::Module>());
  const bool projected = c.word_embed_proj_dim != c.hidden_size;
  if (first || (embedding_on_last_stage && last)) {
    embed_tokens_ = decoder->register_module(
        "embed_tokens",
        layers::make_embedding(ctx.child("embed_tokens"), c.vocab_size, c.word_embed_proj_dim));
    embed_tokens_->set_padding_idx(c.pad_token_id);
  }
  if (first) {
    embed_positions_ = decoder->register_module(
        "embed_positions",
        layers::make_embedding(ctx.child("embed_positions"),
                               c.max_position_embeddings + kPositionOffset, c.hidden_size));
    if (projected) {
      project_in_ = decoder->register_module(
          "project_in", layers::make_linear(ctx.child("project_in"), c.word_embed_proj_dim,
                                            c.hidden_size, {.bias = false}));
    }
  }
  layers_ = layers::LayerStack<OPTDecoderLayer>(
      *decoder, ctx, "layers", c.num_hidden_layers, [&](const auto& layer_ctx, int64_t i) {
        return std::make_shared<OPTDecoderLayer>(layer_ctx, c, i);
      });
  if (last && c.final_layer_norm) {
    final_layer_norm_ = decoder->register_module(
        "final_layer_norm",
        std::make_shared<layers::LayerNorm>(ctx.child("final_layer_norm"), c.hidden_size, 1e-5));
  }
  if (last && projected) {
    project_out_ = decoder->register_module(
        "project_out", layers::make_linear(ctx.child("project_out"), c.hidden_size,
                                           c.word_embed_proj_dim, {.bias = false}));
  }
}

ModelShape OPTModel::shape() const {
  return ModelShape{.num_layers = config_.num_hidden_layers,
                    .num_heads = layers_.front()->num_kv_heads(),
                    .head_dim = config_.hidden_size / config_.num_attention_heads,
                    .hidden_size = config_.word_embed_proj_dim,
                    .vocab_size = config_.vocab_size,
                    .max_positions = config_.max_position_embeddings};
}

at::Tensor OPTModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  layers::ForwardStep step = layers::forward_step(inputs, layers_.first_layer(chunk), {});
  if (!inputs.position_ids.defined() && inputs.attention_mask.defined()) {
    // HF counts real tokens only: positions cumsum(mask) * mask - 1 (padding: -1, row 1).
    const at::Tensor mask = inputs.attention_mask.to(at::kLong);  // [batch, past + seq]
    step.positions = (mask.cumsum(1) * mask - 1).narrow(1, step.past, inputs.input_ids.size(1));
  }
  at::Tensor x;  // [batch, seq, hidden]
  if (starts_model(chunk)) {
    x = inputs.inputs_embeds.defined()
            ? inputs.inputs_embeds
            : embed_tokens_->forward(inputs.input_ids);  // [batch, seq, word_embed_proj_dim]
    if (project_in_) x = project_in_->forward(x);
    x = x + embed_positions_->forward(step.positions + kPositionOffset);
  } else {
    x = layers::stage_input(inputs);
  }
  x = layers_.forward(
      chunk, x,
      layers::AttentionStep{.mask = step.mask, .causal = step.causal, .cache = inputs.cache});
  if (!ends_model(chunk)) return x;
  if (final_layer_norm_) x = final_layer_norm_->forward(x);
  return project_out_ ? project_out_->forward(x) : x;
}

}  // namespace shardformer::opt
