// BLIP-2's Q-Former, as in HF's modeling_blip_2.py (the query branch: query_length = every
// token, so the text branch's intermediate / output modules are never run).
#include "blip2_qformer.h"

#include "shardformer/layers/module_path.h"

namespace shardformer::blip2 {

using layers::register_at;

Blip2QFormerLayer::Blip2QFormerLayer(const BuildContext& ctx, const Blip2QFormerConfig& c,
                                     int64_t layer_idx) {
  const int64_t heads = c.num_attention_heads, head_dim = c.hidden_size / heads;
  const auto at = [&](const std::string& path) { return layers::context_at(ctx, path); };
  const auto norm = [&](const std::string& path) {
    return register_at(
        *this, path,
        std::make_shared<layers::LayerNorm>(at(path), c.hidden_size, c.layer_norm_eps));
  };
  const auto dropout = [&](const std::string& path) {
    return register_at(*this, path,
                       std::make_shared<layers::Dropout>(at(path), c.hidden_dropout_prob));
  };
  attention_ = register_module(
      "attention", std::make_shared<layers::SelfAttention>(
                       ctx.child("attention"),
                       layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                                    .num_heads = heads,
                                                    .num_kv_heads = heads,
                                                    .head_dim = head_dim,
                                                    .qkv_bias = true,
                                                    .out_bias = true,
                                                    .dropout = c.attention_probs_dropout_prob,
                                                    .out_name = "output.dense",
                                                    .q_name = "attention.query",
                                                    .k_name = "attention.key",
                                                    .v_name = "attention.value"},
                       layer_idx));
  attention_norm_ = norm("attention.output.LayerNorm");
  attention_dropout_ = dropout("attention.output.dropout");
  if (c.cross_attends(layer_idx)) {
    crossattention_ =
        register_module("crossattention",
                        std::make_shared<layers::CrossAttention>(
                            ctx.child("crossattention"),
                            layers::CrossAttentionOptions{.hidden_size = c.hidden_size,
                                                          .memory_size = c.encoder_hidden_size,
                                                          .num_heads = heads,
                                                          .head_dim = head_dim,
                                                          .q_bias = true,
                                                          .k_bias = true,
                                                          .v_bias = true,
                                                          .out_bias = true,
                                                          .dropout = c.attention_probs_dropout_prob,
                                                          .q_name = "attention.query",
                                                          .k_name = "attention.key",
                                                          .v_name = "attention.value",
                                                          .out_name = "output.dense"},
                            layer_idx));
    cross_norm_ = norm("crossattention.output.LayerNorm");
    cross_dropout_ = dropout("crossattention.output.dropout");
  }
  feed_forward_ = std::make_shared<layers::MLP>(
      ctx, layers::MLPOptions{.hidden_size = c.hidden_size,
                              .intermediate_size = c.intermediate_size,
                              .activation = c.hidden_act,
                              .in_name = "intermediate_query.dense",
                              .out_name = "output_query.dense",
                              .owner = this});
  output_norm_ = norm("output_query.LayerNorm");
  output_dropout_ = dropout("output_query.dropout");
  if (c.use_qformer_text_input) {
    ctx.skip_module("intermediate", "captioning runs the Q-Former's query branch only");
    ctx.skip_module("output", "captioning runs the Q-Former's query branch only");
  }
}

at::Tensor Blip2QFormerLayer::forward(const at::Tensor& x, const layers::EncoderDecoderStep& step) {
  at::Tensor h =
      attention_->forward_residual(x, step.self, x, attention_norm_.get(),
                                   attention_dropout_.get())
          .normed;  // [batch, queries, hidden]
  if (crossattention_) {
    h = crossattention_
            ->forward_residual(h, step.memory, step.memory_mask, nullptr, h, cross_norm_.get(),
                               cross_dropout_.get())
            .normed;
  }
  return feed_forward_->forward_residual(h, h, output_norm_.get(), output_dropout_.get()).normed;
}

Blip2QFormerModel::Blip2QFormerModel(const BuildContext& ctx, const Blip2QFormerConfig& c) {
  layernorm_ = register_module(
      "layernorm",
      std::make_shared<layers::LayerNorm>(ctx.child("layernorm"), c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.hidden_dropout_prob));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers_ = layers::LayerStack<Blip2QFormerLayer>(
      *encoder, ctx.child("encoder"), "layer", c.num_hidden_layers,
      [&](const BuildContext& layer_ctx, int64_t i) {
        return std::make_shared<Blip2QFormerLayer>(layer_ctx, c, i);
      });
}

at::Tensor Blip2QFormerModel::forward(const at::Tensor& queries, const at::Tensor& image) {
  const at::Tensor x = dropout_->forward(layernorm_->forward(queries));
  return layers_.forward(0, x, layers::EncoderDecoderStep{.self = {}, .memory = image});
}

}  // namespace shardformer::blip2
