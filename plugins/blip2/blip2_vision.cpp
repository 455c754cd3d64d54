// BLIP-2's vision encoder, as in HF's modeling_blip_2.py.
#include "blip2_vision.h"

namespace shardformer::blip2 {

Blip2EncoderLayer::Blip2EncoderLayer(const BuildContext& ctx, const Blip2VisionConfig& c,
                                     int64_t layer_idx) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  layer_norm1_ = norm("layer_norm1");
  layer_norm2_ = norm("layer_norm2");
  // HF keeps k's third of qkv.bias (zeros in BLIP-2's own weights) as a parameter like the rest.
  self_attn_ = register_module(
      "self_attn", std::make_shared<layers::StackedQKVAttention>(
                       ctx.child("self_attn"),
                       layers::StackedQKVOptions{.hidden_size = c.hidden_size,
                                                 .num_heads = c.num_attention_heads,
                                                 .qkv_bias = c.qkv_bias,
                                                 .dropout = c.attention_dropout,
                                                 .out_name = "projection",
                                                 .heads_key = "vision_config.num_attention_heads"},
                       layer_idx));
  mlp_ = register_module(
      "mlp", std::make_shared<layers::MLP>(
                 ctx.child("mlp"), layers::MLPOptions{.hidden_size = c.hidden_size,
                                                      .intermediate_size = c.intermediate_size,
                                                      .activation = c.hidden_act,
                                                      .in_name = "fc1",
                                                      .out_name = "fc2"}));
}

at::Tensor Blip2EncoderLayer::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  const at::Tensor h = x + self_attn_->forward(layer_norm1_->forward(x), step);  // [b, t, hidden]
  return mlp_->forward_residual(layer_norm2_->forward(h), h, nullptr).sum;
}

Blip2VisionModel::Blip2VisionModel(const BuildContext& ctx, const Blip2VisionConfig& c) {
  embeddings_ = register_module(
      "embeddings",
      std::make_shared<layers::ClassTokenEmbedding>(
          ctx.child("embeddings"),
          layers::ClassTokenEmbeddingOptions{.patch = {.channels = 3,
                                                       .hidden_size = c.hidden_size,
                                                       .patch = {c.patch_size, c.patch_size}},
                                             .image_size = {c.image_size, c.image_size},
                                             .patch_name = "patch_embedding",
                                             .class_name = "class_embedding",
                                             .positions_name = "position_embedding",
                                             .model = "BLIP-2"}));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers_ = layers::LayerStack<Blip2EncoderLayer>(
      *encoder, ctx.child("encoder"), "layers", c.num_hidden_layers,
      [&](const BuildContext& layer_ctx, int64_t i) {
        return std::make_shared<Blip2EncoderLayer>(layer_ctx, c, i);
      });
  post_layernorm_ = register_module(
      "post_layernorm", std::make_shared<layers::LayerNorm>(ctx.child("post_layernorm"),
                                                            c.hidden_size, c.layer_norm_eps));
}

at::Tensor Blip2VisionModel::forward(const at::Tensor& pixels, bool interpolate) {
  at::Tensor x = embeddings_->forward(pixels, interpolate);  // [batch, 1 + patches, hidden]
  x = layers_.forward(0, x, layers::AttentionStep{});        // bidirectional, no padding
  return post_layernorm_->forward(x);
}

}  // namespace shardformer::blip2
