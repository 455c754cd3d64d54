// Swin's embeddings, window-attention blocks, patch merging, pooler and classifier, as in HF's
// modeling_swin.py.
#include "swin_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/layers/windows.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::swin {

namespace {

constexpr const char* kSelf = "attention.self";

}  // namespace

SwinLayer::SwinLayer(const BuildContext& ctx, const SwinConfig& c, int64_t stage, int64_t block)
    : shifted_(block % 2 == 1) {
  const int64_t dim = c.dim(stage), heads = c.num_heads[static_cast<size_t>(stage)];
  const auto norm = [&](const char* name) {
    return register_module(
        name, std::make_shared<layers::LayerNorm>(ctx.child(name), dim, c.layer_norm_eps));
  };
  layernorm_before_ = norm("layernorm_before");
  layernorm_after_ = norm("layernorm_after");
  attention_ =
      register_module("attention", std::make_shared<layers::SelfAttention>(
                                       ctx.child("attention"),
                                       layers::SelfAttentionOptions{.hidden_size = dim,
                                                                    .num_heads = heads,
                                                                    .num_kv_heads = heads,
                                                                    .head_dim = dim / heads,
                                                                    .qkv_bias = c.qkv_bias,
                                                                    .out_bias = true,
                                                                    .key_bias = c.qkv_bias,
                                                                    .dropout = c.attention_dropout,
                                                                    .out_name = "output.dense",
                                                                    .q_name = "self.query",
                                                                    .k_name = "self.key",
                                                                    .v_name = "self.value"},
                                       c.first_block(stage) + block));
  // The table sits in attention.self beside the projections; its columns follow their heads.
  const bool split = layers::split_pair(layers::context_at(ctx, "attention.self.query"),
                                        layers::context_at(ctx, "attention.output.dense"));
  relative_position_bias_ = std::make_shared<layers::RelativePositionTable>(
      layers::context_at(ctx, kSelf),
      layers::RelativePositionTableOptions{.window = {c.window_size, c.window_size},
                                           .num_heads = heads,
                                           .owner = layers::module_at(*this, kSelf).get()},
      split);
  // intermediate.dense and output.dense sit in the block itself: the MLP registers them here.
  mlp_ = std::make_shared<layers::MLP>(
      ctx, layers::MLPOptions{.hidden_size = dim,
                              .intermediate_size = c.intermediate_size(stage),
                              .activation = c.hidden_act,
                              .bias = true,
                              .in_name = "intermediate.dense",
                              .out_name = "output.dense",
                              .owner = this});
  // One dropout after both branches, as in HF.
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.hidden_dropout));
  // Stochastic depth on the attention branch only (HF's SwinLayer), where its rate is above 0.
  if (const double rate =
          layers::drop_path_rate(c.drop_path_rate, c.first_block(stage) + block, c.num_blocks());
      rate > 0) {
    drop_path_ = register_module("drop_path",
                                 std::make_shared<layers::DropPath>(ctx.child("drop_path"), rate));
  }
}

at::Tensor SwinLayer::forward(const at::Tensor& x, const SwinStep& step) {
  const int64_t batch = x.size(0), channels = x.size(2);
  const int64_t shift = shifted_ ? step.shift : 0;
  const auto attend = [&](const at::Tensor& windows, int64_t, int64_t) {
    layers::AttentionStep attention;
    attention.bias = relative_position_bias_->bias();  // [1, heads/tp, w^2, w^2]
    if (shift > 0) {  // the shift's mask per window, the same for every image
      const at::Tensor& mask = step.shift_mask;  // [n, w^2, w^2]
      attention.bias = (attention.bias.unsqueeze(1) + mask.unsqueeze(1).unsqueeze(0))
                           .expand({batch, -1, -1, -1, -1})
                           .reshape({-1, attention.bias.size(1), mask.size(1), mask.size(2)});
    }
    return dropout_->forward(attention_->forward(windows, attention));  // [batch * n, w^2, dim]
  };
  const at::Tensor out = layers::attend_in_windows(
      layernorm_before_->forward(x).view({batch, step.height, step.width, channels}), step.window,
      shift, attend);                                      // [batch, height, width, dim]
  at::Tensor branch = out.reshape({batch, -1, channels});  // [batch, tokens, dim]
  if (drop_path_) branch = drop_path_->forward(branch);
  const at::Tensor h = x + branch;
  return mlp_->forward_residual(layernorm_after_->forward(h), h, nullptr, dropout_.get()).sum;
}

SwinModel::SwinModel(const BuildContext& ctx, const SwinConfig& c) : config_(c) {
  bind(ctx);
  ctx.refuse_sequence_parallelism("Swin", "its windows of image tokens are not split");
  if (ctx.builds_first_piece()) {
    auto embeddings = register_module("embeddings", std::make_shared<torch::nn::Module>());
    const BuildContext e = ctx.child("embeddings");
    patch_embeddings_ = layers::register_at(
        *embeddings, "patch_embeddings.projection",
        std::make_shared<layers::PatchEmbedding>(
            layers::context_at(e, "patch_embeddings.projection"),
            layers::PatchEmbeddingOptions{
                .channels = c.num_channels, .hidden_size = c.embed_dim, .patch = c.patch_size}));
    // HF builds this norm with LayerNorm's default eps, not the config's.
    embeddings_norm_ = embeddings->register_module(
        "norm", std::make_shared<layers::LayerNorm>(e.child("norm"), c.embed_dim, 1e-5));
    if (c.absolute_positions) {
      const auto [gh, gw] = c.patch_grid(c.image_size[0], c.image_size[1]);
      position_embeddings_ = embeddings->register_parameter(
          "position_embeddings", e.load("position_embeddings", {1, gh * gw, c.embed_dim}));
    }
    embeddings_dropout_ = embeddings->register_module(
        "dropout", std::make_shared<layers::Dropout>(e.child("dropout"), c.hidden_dropout));
    e.skip("mask_token", "the masked-image-modeling token for masked patches");
  }
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  const BuildContext layers_ctx = ctx.child("encoder").child("layers");
  for (int64_t s = 0; s < c.num_stages(); ++s) {
    const int64_t depth = c.depths[static_cast<size_t>(s)];
    const std::vector<LayerRange> ranges =
        ctx.layer_ranges(c.num_blocks(), c.first_block(s), depth);
    if (ranges.size() != 1) {
      throw ConfigError(
          "Swin: an interleaved pipeline (several model chunks per stage) is not "
          "supported; use the 1F1B or GPipe schedule");
    }
    const LayerRange range = ranges.front();
    auto module = layers::module_at(*encoder, str("layers.", s));
    const BuildContext stage_ctx = layers_ctx.child(s);
    Stage& stage = stages_.emplace_back();
    stage.blocks = layers::LayerStack<SwinLayer>(
        *module, stage_ctx, "blocks", depth,
        [&](const auto& block_ctx, int64_t b) {
          return std::make_shared<SwinLayer>(block_ctx, c, s, b);
        },
        layers::StackSpan{.first = c.first_block(s), .total = c.num_blocks()});
    stage.holds_blocks = range.end > range.begin;
    if (range.end == depth && stage.holds_blocks && s + 1 < c.num_stages()) {
      stage.downsample = module->register_module(
          "downsample",
          std::make_shared<layers::PatchMerging>(stage_ctx.child("downsample"), c.dim(s)));
    }
  }
  if (ctx.builds_last_piece()) {
    layernorm_ = register_module(
        "layernorm", std::make_shared<layers::LayerNorm>(ctx.child("layernorm"), c.num_features(),
                                                         c.layer_norm_eps));
  }
}

at::Tensor SwinModel::embed(const ForwardInputs& inputs) const {
  const at::Tensor& pixels = inputs.pixel_values;  // [batch, channels, height, width]
  // Padded at the bottom and right to whole patches, as HF pads them.
  const int64_t bottom =
      (config_.patch_size[0] - pixels.size(2) % config_.patch_size[0]) % config_.patch_size[0];
  const int64_t right =
      (config_.patch_size[1] - pixels.size(3) % config_.patch_size[1]) % config_.patch_size[1];
  const at::Tensor padded =
      bottom + right > 0 ? at::constant_pad_nd(pixels, {0, right, 0, bottom}) : pixels;
  at::Tensor x = embeddings_norm_->forward(patch_embeddings_->forward(padded));
  if (position_embeddings_.defined()) {
    if (inputs.interpolate_pos_encoding) {
      throw Error(
          "Swin: interpolate_pos_encoding (resizing the absolute position embeddings) is not "
          "supported yet; resize the images to the model's image_size");
    }
    if (x.size(1) != position_embeddings_.size(1)) {
      throw Error(str("Swin: pixel_values of ", pixels.size(2), " x ", pixels.size(3),
                      " pixels, but the model's absolute position embeddings are for image_size ",
                      config_.image_size[0], " x ", config_.image_size[1], " (resize the images)"));
    }
    x = x + position_embeddings_;
  }
  return embeddings_dropout_->forward(x);  // [batch, patches, embed_dim]
}

SwinStep SwinModel::step(int64_t stage, int64_t height, int64_t width,
                         const at::TensorOptions& options) const {
  SwinStep step{.height = height, .width = width, .window = config_.window_size};
  const int64_t smaller = std::min(height, width);
  if (smaller < step.window) {
    // HF then shrinks the window to the grid, which its relative position table (made for
    // window_size) does not fit.
    throw Error(str("Swin: stage ", stage, "'s grid of ", height, " x ", width,
                    " patches is smaller than window_size ", step.window, " (use larger images)"));
  }
  if (smaller > step.window) {
    step.shift = step.window / 2;
    if (step.shift > 0) {
      const int64_t w = step.window;
      step.shift_mask = layers::shifted_window_mask(
          (height + w - 1) / w * w, (width + w - 1) / w * w, w, step.shift, options);
    }
  }
  return step;
}

at::Tensor SwinModel::forward(const ForwardInputs& inputs) {
  const at::Tensor& pixels = inputs.pixel_values;
  if (!pixels.defined() || pixels.dim() != 4) {
    throw Error(
        "Swin reads pixel_values [batch, channels, height, width], not token ids: images "
        "come through the classify job or ForwardInputs::pixel_values");
  }
  at::Tensor x = starts_model(inputs.chunk) ? embed(inputs) : layers::stage_input(inputs);
  auto [height, width] = config_.patch_grid(pixels.size(2), pixels.size(3));
  for (int64_t s = 0; s < config_.num_stages(); ++s) {
    const Stage& stage = stages_[static_cast<size_t>(s)];
    if (stage.holds_blocks) {
      x = stage.blocks.forward(0, x, step(s, height, width, x.options()));
    }
    if (stage.downsample) x = stage.downsample->forward(x, height, width);
    height = (height + 1) / 2;
    width = (width + 1) / 2;
  }
  return ends_model(inputs.chunk) ? layernorm_->forward(x) : x;
}

std::map<std::string, at::Tensor> SwinModel::forward_all(const ForwardInputs& inputs) {
  const at::Tensor hidden = forward(inputs);
  if (!ends_model(inputs.chunk)) return {{"last_hidden_state", hidden}};
  return {{"last_hidden_state", hidden}, {"pooler_output", pool(hidden)}};
}

ModelShape SwinModel::shape() const {
  const int64_t heads = config_.num_heads.back();
  return ModelShape{.num_layers = config_.num_blocks(),
                    .num_heads = heads,
                    .head_dim = config_.num_features() / heads,
                    .hidden_size = config_.num_features(),
                    .vocab_size = 0,
                    .max_positions = 0};
}

SwinForImageClassification::SwinForImageClassification(const BuildContext& ctx,
                                                       const SwinConfig& c) {
  bind(ctx);
  swin_ = register_module("swin", std::make_shared<SwinModel>(ctx.child("swin"), c));
  if (ctx.builds_last_piece()) {
    classifier_ = register_module(
        "classifier", layers::make_linear(ctx.child("classifier"), c.num_features(), c.num_labels));
  }
}

at::Tensor SwinForImageClassification::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = swin_->forward(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  return classifier_->forward(SwinModel::pool(hidden));  // [batch, num_labels]
}

}  // namespace shardformer::swin
