// BLIP-2's Q-Former, as in HF's modeling_blip_2.py (the query branch: query_length = every
// token, so the text branch's intermediate / output modules are never run).
#include "blip2_qformer.h"

namespace shardformer::blip2 {

namespace {

// A Q-Former layer: BERT's names for self- and cross-attention, the query branch's feed-forward.
layers::PostNormBlockOptions layer_options(const Blip2QFormerConfig& c, int64_t layer_idx) {
  return layers::PostNormBlockOptions{
      .hidden_size = c.hidden_size,
      .num_heads = c.num_attention_heads,
      .intermediate_size = c.intermediate_size,
      .activation = c.hidden_act,
      .layer_norm_eps = c.layer_norm_eps,
      .hidden_dropout = c.hidden_dropout_prob,
      .attention_dropout = c.attention_probs_dropout_prob,
      .memory_size = c.cross_attends(layer_idx) ? c.encoder_hidden_size : 0,
      .names = {.query = "attention.query",
                .key = "attention.key",
                .value = "attention.value",
                .intermediate = "intermediate_query.dense",
                .output = "output_query.dense",
                .output_norm = "output_query.LayerNorm",
                .output_dropout = "output_query.dropout"}};
}

}  // namespace

Blip2QFormerModel::Blip2QFormerModel(const BuildContext& ctx, const Blip2QFormerConfig& c) {
  layernorm_ = register_module(
      "layernorm",
      std::make_shared<layers::LayerNorm>(ctx.child("layernorm"), c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.hidden_dropout_prob));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers_ = layers::LayerStack<layers::PostNormEncoderBlock>(
      *encoder, ctx.child("encoder"), "layer", c.num_hidden_layers,
      [&](const BuildContext& layer_ctx, int64_t i) {
        if (c.use_qformer_text_input) {
          layer_ctx.skip_module("intermediate", "captioning runs the Q-Former's query branch only");
          layer_ctx.skip_module("output", "captioning runs the Q-Former's query branch only");
        }
        return std::make_shared<layers::PostNormEncoderBlock>(layer_ctx, layer_options(c, i), i);
      });
}

at::Tensor Blip2QFormerModel::forward(const at::Tensor& queries, const at::Tensor& image) {
  const at::Tensor x = dropout_->forward(layernorm_->forward(queries));
  return layers_.forward(0, x, layers::EncoderDecoderStep{.self = {}, .memory = image});
}

}  // namespace shardformer::blip2
