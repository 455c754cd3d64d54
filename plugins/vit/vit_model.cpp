// ViT's and BEiT's embeddings, encoder layers, pooler and classifier, as in HF's modeling_vit.py
// and modeling_beit.py.
#include "vit_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::vit {

namespace {

constexpr const char* kQuery = "attention.attention.query";
constexpr const char* kOutput = "attention.output.dense";

}  // namespace

bool splits_heads(const BuildContext& layer) {
  return layers::split_pair(layers::context_at(layer, kQuery), layers::context_at(layer, kOutput));
}

layers::RelativePositionTableOptions relative_table_options(const ViTConfig& c) {
  return {.window = {c.image_size[0] / c.patch_size[0], c.image_size[1] / c.patch_size[1]},
          .num_heads = c.num_attention_heads,
          .class_token = true};
}

ViTLayer::ViTLayer(const BuildContext& ctx, const ViTConfig& c, int64_t layer_idx) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  sublayers_.self_norm = norm("layernorm_before").get();
  sublayers_.ff_norm = norm("layernorm_after").get();
  const int64_t heads = c.num_attention_heads;
  sublayers_.self_attn =
      register_module("attention",
                      std::make_shared<layers::SelfAttention>(
                          ctx.child("attention"),
                          layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                                       .num_heads = heads,
                                                       .num_kv_heads = heads,
                                                       .head_dim = c.hidden_size / heads,
                                                       .qkv_bias = c.qkv_bias,
                                                       .out_bias = true,
                                                       .key_bias = c.key_bias,
                                                       .dropout = c.attention_dropout,
                                                       .out_name = "output.dense",
                                                       .q_name = "attention.query",
                                                       .k_name = "attention.key",
                                                       .v_name = "attention.value"},
                          layer_idx))
          .get();
  // intermediate.dense and output.dense sit in the layer itself: the MLP registers them here.
  mlp_ = std::make_shared<layers::MLP>(ctx,
                                       layers::MLPOptions{.hidden_size = c.hidden_size,
                                                          .intermediate_size = c.intermediate_size,
                                                          .activation = c.hidden_act,
                                                          .bias = true,
                                                          .in_name = "intermediate.dense",
                                                          .out_name = "output.dense",
                                                          .owner = this});
  sublayers_.mlp = mlp_.get();
  // One dropout module after both sublayers, as in HF.
  layers::Dropout* dropout = register_module("dropout", std::make_shared<layers::Dropout>(
                                                            ctx.child("dropout"), c.hidden_dropout))
                                 .get();
  sublayers_.self_dropout = sublayers_.ff_dropout = dropout;
  if (c.relative_position_bias) {
    const std::string path = "attention.attention.relative_position_bias";
    relative_position_bias_ = layers::register_at(
        *this, path,
        std::make_shared<layers::RelativePositionTable>(
            layers::context_at(ctx, path), relative_table_options(c), splits_heads(ctx)));
  }
  // BEiT's stochastic depth, where its rate is above 0 (HF's Identity otherwise).
  if (const double rate = layers::drop_path_rate(c.drop_path_rate, layer_idx, c.num_hidden_layers);
      rate > 0) {
    sublayers_.drop_path = register_module("drop_path", std::make_shared<layers::DropPath>(
                                                            ctx.child("drop_path"), rate))
                               .get();
  }
  if (c.layer_scale > 0) {
    sublayers_.self_scale = register_parameter("lambda_1", ctx.load("lambda_1", {c.hidden_size}));
    sublayers_.ff_scale = register_parameter("lambda_2", ctx.load("lambda_2", {c.hidden_size}));
  }
}

at::Tensor ViTLayer::forward(const at::Tensor& x, const layers::AttentionStep& shared) {
  layers::EncoderDecoderStep step{.self = shared};  // the shared table's bias, plus this layer's
  if (relative_position_bias_) {
    const at::Tensor own = relative_position_bias_->bias();
    step.self.bias = step.self.bias.defined() ? step.self.bias + own : own;
  }
  return layers::pre_norm_block(sublayers_, x, step);
}

ViTModel::ViTModel(const BuildContext& ctx, const ViTConfig& c, bool pooler)
    : config_(c), pools_(pooler) {
  bind(ctx);
  ctx.refuse_sequence_parallelism(c.beit ? "BEiT" : "ViT", "its image tokens are not split yet");
  if (ctx.builds_first_piece()) {
    const BuildContext e = ctx.child("embeddings");
    embeddings_ = register_module("embeddings", std::make_shared<layers::ClassTokenEmbedding>(
                                                    e, layers::ClassTokenEmbeddingOptions{
                                                           .patch = {.channels = c.num_channels,
                                                                     .hidden_size = c.hidden_size,
                                                                     .patch = c.patch_size},
                                                           .image_size = c.image_size,
                                                           .positions = c.absolute_positions,
                                                           .model = c.beit ? "BEiT" : "ViT"}));
    embeddings_dropout_ = embeddings_->register_module(
        "dropout", std::make_shared<layers::Dropout>(e.child("dropout"), c.hidden_dropout));
    e.skip("mask_token", "the masked-image-modeling token for masked patches");
  }
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  const BuildContext encoder_ctx = ctx.child("encoder");
  if (c.shared_relative_position_bias) {  // every stage's layers read it (a shared parameter)
    shared_bias_ = encoder->register_module(
        "relative_position_bias",
        std::make_shared<layers::RelativePositionTable>(
            encoder_ctx.child("relative_position_bias"), relative_table_options(c),
            splits_heads(encoder_ctx.child("layer").child(0))));
  }
  layers_ = layers::LayerStack<ViTLayer>(*encoder, encoder_ctx, "layer", c.num_hidden_layers,
                                         [&](const auto& layer_ctx, int64_t i) {
                                           return std::make_shared<ViTLayer>(layer_ctx, c, i);
                                         });
  if (ctx.builds_last_piece()) {
    if (!(c.beit && c.mean_pooling)) {  // BEiT with mean pooling has no final layernorm
      layernorm_ = register_module(
          "layernorm", std::make_shared<layers::LayerNorm>(ctx.child("layernorm"), c.hidden_size,
                                                           c.layer_norm_eps));
    }
    if (pooler && !c.beit) {
      auto module = register_module("pooler", std::make_shared<torch::nn::Module>());
      pooler_ = module->register_module(
          "dense", layers::make_linear(ctx.child("pooler").child("dense"), c.hidden_size,
                                       c.pooler_output_size));
    } else if (pooler && c.mean_pooling) {
      auto module = register_module("pooler", std::make_shared<torch::nn::Module>());
      pooler_norm_ = module->register_module(
          "layernorm", std::make_shared<layers::LayerNorm>(ctx.child("pooler").child("layernorm"),
                                                           c.hidden_size, c.layer_norm_eps));
    }
  }
  if (!pooler) ctx.skip_module("pooler", "this class reads the class token, not the pooler");
}

at::Tensor ViTModel::embed(const ForwardInputs& inputs) const {
  const at::Tensor& pixels = inputs.pixel_values;
  if (!pixels.defined()) {
    throw Error(
        "ViT reads pixel_values [batch, channels, height, width], not token ids: images "
        "come through the classify job or ForwardInputs::pixel_values");
  }
  if (config_.beit && inputs.interpolate_pos_encoding) {
    throw Error(
        "BEiT: interpolate_pos_encoding (resizing the relative position tables) is not "
        "supported yet; resize the images to the model's image_size");
  }
  return embeddings_dropout_->forward(
      embeddings_->forward(pixels, inputs.interpolate_pos_encoding));
}

at::Tensor ViTModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  at::Tensor x = starts_model(chunk) ? embed(inputs) : layers::stage_input(inputs);
  layers::AttentionStep step;  // bidirectional, no padding; BEiT's shared table as a bias
  if (shared_bias_) step.bias = shared_bias_->bias();
  x = layers_.forward(chunk, x, step);
  return ends_model(chunk) && layernorm_ ? layernorm_->forward(x) : x;
}

at::Tensor ViTModel::pool(const at::Tensor& hidden) const {
  if (!pools_ || !ends_model()) throw Error("this stage has no pooler");
  if (pooler_) {  // ViT: act(dense(the class token))
    return layers::apply_activation(config_.pooler_act, pooler_->forward(hidden.select(1, 0)));
  }
  if (pooler_norm_) {  // BEiT: the patch tokens' mean, normed
    return pooler_norm_->forward(hidden.narrow(1, 1, hidden.size(1) - 1).mean(1));
  }
  return hidden.select(1, 0);  // BEiT without mean pooling: the class token
}

std::map<std::string, at::Tensor> ViTModel::forward_all(const ForwardInputs& inputs) {
  const at::Tensor hidden = forward(inputs);
  if (!ends_model(inputs.chunk) || !pools_) return {{"last_hidden_state", hidden}};
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

ViTForImageClassification::ViTForImageClassification(const BuildContext& ctx, const ViTConfig& c)
    : beit_(c.beit) {
  bind(ctx);
  const std::string base = c.base_name();
  vit_ = register_module(base, std::make_shared<ViTModel>(ctx.child(base), c, c.beit));
  if (ctx.builds_last_piece()) {
    classifier_ = register_module(
        "classifier", layers::make_linear(ctx.child("classifier"), c.hidden_size, c.num_labels));
  }
}

at::Tensor ViTForImageClassification::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = vit_->forward(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  // ViT: the class token's state; BEiT: the pooler's output. [batch, num_labels]
  return classifier_->forward(beit_ ? vit_->pool(hidden) : hidden.select(1, 0));
}

}  // namespace shardformer::vit
