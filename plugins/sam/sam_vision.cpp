// SAM's image encoder, as in HF's modeling_sam.py (SamPatchEmbeddings to SamVisionNeck).
#include "sam_vision.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/layers/windows.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::sam {

std::shared_ptr<layers::MLP> make_sam_mlp(const BuildContext& ctx, int64_t hidden_size,
                                          int64_t mlp_dim, layers::Activation activation) {
  return std::make_shared<layers::MLP>(ctx, layers::MLPOptions{.hidden_size = hidden_size,
                                                               .intermediate_size = mlp_dim,
                                                               .activation = activation,
                                                               .bias = true,
                                                               .in_name = "lin1",
                                                               .out_name = "lin2"});
}

SamVisionLayer::SamVisionLayer(const BuildContext& ctx, const SamVisionConfig& c, int64_t layer)
    : window_(c.window(layer)) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  layer_norm1_ = norm("layer_norm1");
  layer_norm2_ = norm("layer_norm2");
  const BuildContext a = ctx.child("attn");
  attn_ = register_module(
      "attn", std::make_shared<layers::StackedQKVAttention>(
                  a,
                  layers::StackedQKVOptions{.hidden_size = c.hidden_size,
                                            .num_heads = c.num_attention_heads,
                                            .qkv_bias = c.qkv_bias,
                                            .dropout = c.attention_dropout,
                                            .heads_key = "vision_config.num_attention_heads"},
                  layer));
  if (c.use_rel_pos) {
    const int64_t size = window_ > 0 ? window_ : c.grid();
    rel_pos_ = std::make_shared<layers::DecomposedRelativePosition>(
        a, std::array<int64_t, 2>{size, size}, attn_->head_dim(), attn_->split(), *attn_);
  }
  mlp_ = register_module("mlp",
                         make_sam_mlp(ctx.child("mlp"), c.hidden_size, c.mlp_dim, c.hidden_act));
}

at::Tensor SamVisionLayer::attend(const at::Tensor& x, int64_t height, int64_t width) {
  const int64_t batch = x.size(0);
  const auto [q, k, v] = attn_->project(x.reshape({batch, height * width, -1}));  // [b, h, hw, d]
  layers::AttentionArgs args;
  if (rel_pos_) args.bias = rel_pos_->bias(q, height, width);  // [b, heads, hw, hw]
  return attn_->output(attn_->attend(q, k, v, args)).view({batch, height, width, -1});
}

at::Tensor SamVisionLayer::forward(const at::Tensor& x, const SamVisionStep& /*step*/) {
  const at::Tensor normed = layer_norm1_->forward(x);  // [batch, height, width, hidden]
  at::Tensor attended;
  if (window_ > 0) {
    attended = layers::attend_in_windows(
        normed, window_, 0, [&](const at::Tensor& windows, int64_t, int64_t) {
          // [batch * n, w^2, hidden] -> same
          return attend(windows.view({-1, window_, window_, windows.size(-1)}), window_, window_)
              .flatten(1, 2);
        });
  } else {
    attended = attend(normed, x.size(1), x.size(2));
  }
  const at::Tensor h = x + attended;
  return h + mlp_->forward(layer_norm2_->forward(h));
}

SamVisionEncoder::SamVisionEncoder(const BuildContext& ctx, const SamVisionConfig& c) : config_(c) {
  patch_embed_ = layers::register_at(
      *this, "patch_embed.projection",
      std::make_shared<layers::PatchEmbedding>(
          layers::context_at(ctx, "patch_embed.projection"),
          layers::PatchEmbeddingOptions{.channels = c.num_channels,
                                        .hidden_size = c.hidden_size,
                                        .patch = {c.patch_size, c.patch_size}}));
  if (c.use_abs_pos) {
    pos_embed_ = register_parameter("pos_embed",
                                    ctx.load("pos_embed", {1, c.grid(), c.grid(), c.hidden_size}));
  }
  layers_ = layers::LayerStack<SamVisionLayer>(
      *this, ctx, "layers", c.num_hidden_layers, [&](const auto& layer_ctx, int64_t i) {
        return std::make_shared<SamVisionLayer>(layer_ctx, c, i);
      });
  auto neck = register_module("neck", std::make_shared<torch::nn::Module>());
  const BuildContext n = ctx.child("neck");
  const int64_t out = c.output_channels;
  neck_conv1_ = neck->register_module(
      "conv1",
      std::make_shared<layers::Conv>(
          n.child("conv1"),
          layers::ConvOptions{.in = c.hidden_size, .out = out, .kernel = {1, 1}, .bias = false}));
  neck_conv2_ = neck->register_module(
      "conv2", std::make_shared<layers::Conv>(
                   n.child("conv2"),
                   layers::ConvOptions{
                       .in = out, .out = out, .kernel = {3, 3}, .padding = 1, .bias = false}));
  // HF builds the neck's norms with SamLayerNorm's eps, 1e-6, not the config's.
  neck_norm1_ = neck->register_module(
      "layer_norm1", std::make_shared<layers::LayerNorm>(n.child("layer_norm1"), out, 1e-6));
  neck_norm2_ = neck->register_module(
      "layer_norm2", std::make_shared<layers::LayerNorm>(n.child("layer_norm2"), out, 1e-6));
}

at::Tensor SamVisionEncoder::forward(const at::Tensor& pixel_values) {
  const int64_t size = config_.image_size;
  if (pixel_values.dim() != 4 || pixel_values.size(2) != size || pixel_values.size(3) != size) {
    throw Error(str("SAM: pixel_values must be [batch, ", config_.num_channels, ", ", size, ", ",
                    size, "] (SamProcessor resizes the longest side to ", size, " and pads), not ",
                    shape_str(pixel_values.sizes().vec())));
  }
  at::Tensor x = patch_embed_->grid(pixel_values).permute({0, 2, 3, 1});  // [b, g, g, hidden]
  if (pos_embed_.defined()) x = x + pos_embed_;
  x = layers_.forward(0, x, SamVisionStep{});
  x = neck_conv1_->forward(x.permute({0, 3, 1, 2}));  // [batch, out, g, g]
  x = neck_conv2_->forward(layers::channel_norm(*neck_norm1_, x));
  return layers::channel_norm(*neck_norm2_, x);  // [batch, out, g, g]
}

}  // namespace shardformer::sam
