// ViT's embeddings, encoder layers, pooler and classifier, as in HF's modeling_vit.py.
#include "vit_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::vit {

ViTLayer::ViTLayer(const BuildContext& ctx, const ViTConfig& c, int64_t layer_idx) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  layernorm_before_ = norm("layernorm_before");
  layernorm_after_ = norm("layernorm_after");
  const int64_t heads = c.num_attention_heads;
  attention_ = register_module("attention",
                               std::make_shared<layers::SelfAttention>(
                                   ctx.child("attention"),
                                   layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                                                .num_heads = heads,
                                                                .num_kv_heads = heads,
                                                                .head_dim = c.hidden_size / heads,
                                                                .qkv_bias = c.qkv_bias,
                                                                .out_bias = true,
                                                                .dropout = c.attention_dropout,
                                                                .out_name = "output.dense",
                                                                .q_name = "attention.query",
                                                                .k_name = "attention.key",
                                                                .v_name = "attention.value"},
                                   layer_idx));
  // intermediate.dense and output.dense sit in the layer itself: the MLP registers them here.
  mlp_ = std::make_shared<layers::MLP>(ctx,
                                       layers::MLPOptions{.hidden_size = c.hidden_size,
                                                          .intermediate_size = c.intermediate_size,
                                                          .activation = c.hidden_act,
                                                          .bias = true,
                                                          .in_name = "intermediate.dense",
                                                          .out_name = "output.dense",
                                                          .owner = this});
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.hidden_dropout));
}

at::Tensor ViTLayer::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  // Pre-LN: x + dropout(attention(layernorm_before(x))), its sum normed by layernorm_after in the
  // same pass; then the MLP's residual.
  const layers::ResidualSum h = attention_->forward_residual(
      layernorm_before_->forward(x), step, x, layernorm_after_.get(), dropout_.get());
  return mlp_->forward_residual(h.normed, h.sum, nullptr, dropout_.get()).sum;
}

ViTModel::ViTModel(const BuildContext& ctx, const ViTConfig& c, bool pooler) : config_(c) {
  bind(ctx);
  ctx.refuse_sequence_parallelism("ViT", "its image tokens are not split yet");
  if (ctx.builds_first_piece()) {
    auto embeddings = register_module("embeddings", std::make_shared<torch::nn::Module>());
    const BuildContext e = ctx.child("embeddings");
    auto patches =
        embeddings->register_module("patch_embeddings", std::make_shared<torch::nn::Module>());
    patch_embeddings_ = patches->register_module(
        "projection",
        std::make_shared<layers::PatchEmbedding>(
            e.child("patch_embeddings").child("projection"),
            layers::PatchEmbeddingOptions{
                .channels = c.num_channels, .hidden_size = c.hidden_size, .patch = c.patch_size}));
    cls_token_ =
        embeddings->register_parameter("cls_token", e.load("cls_token", {1, 1, c.hidden_size}));
    position_embeddings_ = embeddings->register_parameter(
        "position_embeddings",
        e.load("position_embeddings", {1, c.num_patches() + 1, c.hidden_size}));
    embeddings_dropout_ = embeddings->register_module(
        "dropout", std::make_shared<layers::Dropout>(e.child("dropout"), c.hidden_dropout));
    e.skip("mask_token", "ViTForMaskedImageModeling's token for masked patches");
  }
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers_ =
      layers::LayerStack<ViTLayer>(*encoder, ctx.child("encoder"), "layer", c.num_hidden_layers,
                                   [&](const auto& layer_ctx, int64_t i) {
                                     return std::make_shared<ViTLayer>(layer_ctx, c, i);
                                   });
  if (ctx.builds_last_piece()) {
    layernorm_ =
        register_module("layernorm", std::make_shared<layers::LayerNorm>(
                                         ctx.child("layernorm"), c.hidden_size, c.layer_norm_eps));
    if (pooler) {
      auto module = register_module("pooler", std::make_shared<torch::nn::Module>());
      pooler_ = module->register_module(
          "dense", layers::make_linear(ctx.child("pooler").child("dense"), c.hidden_size,
                                       c.pooler_output_size));
    }
  }
  if (!pooler) ctx.skip_module("pooler", "this class reads the class token, not the pooler");
}

at::Tensor ViTModel::positions(int64_t height, int64_t width, bool interpolate) const {
  const auto [image_height, image_width] = config_.image_size;
  if (!interpolate) {
    if (height != image_height || width != image_width) {
      throw Error(str("ViT: pixel_values of ", height, " x ", width,
                      " pixels, but the model's image_size is ", image_height, " x ", image_width,
                      " (resize the images, or interpolate the position embeddings: "
                      "interpolate_pos_encoding)"));
    }
    return position_embeddings_;
  }
  const int64_t patches = (height / config_.patch_size[0]) * (width / config_.patch_size[1]);
  const int64_t learned = position_embeddings_.size(1) - 1;
  if (patches == learned && height == width) return position_embeddings_;
  // HF: the learned positions as a square grid, resized bicubically (align_corners false).
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(learned)));
  if (side * side != learned) {
    throw Error(
        str("ViT: interpolating position embeddings needs a square grid of them; the "
            "model has ",
            learned));
  }
  const int64_t dim = config_.hidden_size;
  const at::Tensor grid = position_embeddings_
                              .narrow(1, 1, learned)  // [1, dim, side, side]
                              .reshape({1, side, side, dim})
                              .permute({0, 3, 1, 2});
  const at::Tensor resized = at::upsample_bicubic2d(
      grid, {height / config_.patch_size[0], width / config_.patch_size[1]}, false);
  return at::cat(
      {position_embeddings_.narrow(1, 0, 1), resized.permute({0, 2, 3, 1}).reshape({1, -1, dim})},
      1);  // [1, 1 + patches, dim]
}

at::Tensor ViTModel::embed(const ForwardInputs& inputs) const {
  const at::Tensor& pixels = inputs.pixel_values;
  if (!pixels.defined()) {
    throw Error(
        "ViT reads pixel_values [batch, channels, height, width], not token ids: images "
        "come through the classify job or ForwardInputs::pixel_values");
  }
  const at::Tensor patches = patch_embeddings_->forward(pixels);  // [batch, patches, hidden]
  const at::Tensor cls = cls_token_.expand({patches.size(0), 1, config_.hidden_size});
  const at::Tensor x = at::cat({cls, patches}, 1) +
                       positions(pixels.size(2), pixels.size(3), inputs.interpolate_pos_encoding);
  return embeddings_dropout_->forward(x);  // [batch, 1 + patches, hidden]
}

at::Tensor ViTModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  at::Tensor x = starts_model(chunk) ? embed(inputs) : layers::stage_input(inputs);
  x = layers_.forward(chunk, x, layers::AttentionStep{});  // bidirectional, no padding
  return ends_model(chunk) ? layernorm_->forward(x) : x;
}

at::Tensor ViTModel::pool(const at::Tensor& hidden) const {
  if (!pooler_) throw Error("this ViT stage has no pooler");
  return layers::apply_activation(config_.pooler_act, pooler_->forward(hidden.select(1, 0)));
}

std::map<std::string, at::Tensor> ViTModel::forward_all(const ForwardInputs& inputs) {
  const at::Tensor hidden = forward(inputs);
  if (!ends_model(inputs.chunk) || !pooler_) return {{"last_hidden_state", hidden}};
  return {{"last_hidden_state", hidden}, {"pooler_output", pool(hidden)}};
}

ModelShape ViTModel::shape() const {
  return ModelShape{.num_layers = config_.num_hidden_layers,
                    .num_heads = config_.num_attention_heads,
                    .head_dim = config_.hidden_size / config_.num_attention_heads,
                    .hidden_size = config_.hidden_size,
                    .vocab_size = 0,
                    .max_positions = config_.num_patches() + 1};
}

ViTForImageClassification::ViTForImageClassification(const BuildContext& ctx, const ViTConfig& c) {
  bind(ctx);
  vit_ = register_module("vit", std::make_shared<ViTModel>(ctx.child("vit"), c, false));
  if (ctx.builds_last_piece()) {
    classifier_ = register_module(
        "classifier", layers::make_linear(ctx.child("classifier"), c.hidden_size, c.num_labels));
  }
}

at::Tensor ViTForImageClassification::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = vit_->forward(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  return classifier_->forward(hidden.select(1, 0));  // [batch, num_labels]
}

}  // namespace shardformer::vit
