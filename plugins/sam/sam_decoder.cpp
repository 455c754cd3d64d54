// SAM's prompt encoder and mask decoder, as in HF's modeling_sam.py (SamPositionalEmbedding,
// SamPromptEncoder, SamAttention to SamMaskDecoder).
#include "sam_decoder.h"

#include "sam_vision.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <array>
#include <cmath>

namespace shardformer::sam {

SamPromptEncoder::SamPromptEncoder(const BuildContext& ctx, const SamPromptConfig& c,
                                   at::Tensor gaussian)
    : config_(c), gaussian_(std::move(gaussian)) {
  const auto embedding = [&](const std::string& name) {
    return layers::module_at(*this, name)
        ->register_parameter("weight",
                             layers::context_at(ctx, name).load("weight", {1, c.hidden_size}));
  };
  no_mask_embed_ = embedding("no_mask_embed");
  not_a_point_embed_ = embedding("not_a_point_embed");
  for (int64_t i = 0; i < c.num_point_embeddings; ++i) {
    point_embed_.push_back(embedding(str("point_embed.", i)));
  }
  auto mask_embed = register_module("mask_embed", std::make_shared<torch::nn::Module>());
  const BuildContext m = ctx.child("mask_embed");
  const int64_t quarter = c.mask_input_channels / 4;
  const std::array<std::array<int64_t, 3>, 3> convs = {{{1, quarter, 2},
                                                        {quarter, c.mask_input_channels, 2},
                                                        {c.mask_input_channels, c.hidden_size, 1}}};
  for (size_t i = 0; i < convs.size(); ++i) {
    const auto [in, out, kernel] = convs[i];
    const std::string name = str("conv", i + 1);
    mask_convs_[i] = mask_embed->register_module(
        name, std::make_shared<layers::Conv>(
                  m.child(name),
                  layers::ConvOptions{
                      .in = in, .out = out, .kernel = {kernel, kernel}, .stride = kernel}));
  }
  mask_norm1_ = mask_embed->register_module(
      "layer_norm1",
      std::make_shared<layers::LayerNorm>(m.child("layer_norm1"), quarter, c.layer_norm_eps));
  mask_norm2_ = mask_embed->register_module(
      "layer_norm2", std::make_shared<layers::LayerNorm>(m.child("layer_norm2"),
                                                         c.mask_input_channels, c.layer_norm_eps));
  ctx.skip("shared_embedding.positional_embedding",
           "tied to shared_image_embedding.positional_embedding (tie_word_embeddings)");
}

at::Tensor SamPromptEncoder::embed_masks(const at::Tensor& masks) const {
  const auto act = [&](const at::Tensor& x) {
    return layers::apply_activation(config_.hidden_act, x);
  };
  at::Tensor x = act(layers::channel_norm(*mask_norm1_, mask_convs_[0]->forward(masks)));
  x = act(layers::channel_norm(*mask_norm2_, mask_convs_[1]->forward(x)));
  return mask_convs_[2]->forward(x);  // [batch, hidden, grid, grid]
}

SamPromptEncoder::Embeddings SamPromptEncoder::forward(const at::Tensor& points,
                                                       const at::Tensor& labels_in,
                                                       const at::Tensor& boxes,
                                                       const at::Tensor& masks,
                                                       int64_t batch) const {
  const double size = static_cast<double>(config_.image_size);
  std::vector<at::Tensor> sparse;
  if (points.defined()) {
    if (points.dim() != 4 || points.size(3) != 2 || points.size(0) != batch) {
      throw Error(str("SAM: input_points must be [batch ", batch, ", point_batch, points, 2], not ",
                      shape_str(points.sizes().vec())));
    }
    at::Tensor labels = labels_in.defined() ? labels_in.to(at::kLong)
                                            : at::ones(points.sizes().slice(0, 3),
                                                       points.options().dtype(at::kLong));
    if (labels.sizes() != points.sizes().slice(0, 3)) {
      throw Error(str("SAM: input_labels must be ", shape_str(points.sizes().slice(0, 3).vec()),
                      " as input_points, not ", shape_str(labels.sizes().vec())));
    }
    at::Tensor shifted = points.to(gaussian_.scalar_type()) + 0.5;  // pixel centres
    if (!boxes.defined()) {  // a padding point, labelled "not a point"
      shifted = at::cat({shifted, at::zeros_like(shifted.narrow(2, 0, 1))}, 2);
      labels = at::cat({labels, at::full_like(labels.narrow(2, 0, 1), -1)}, 2);
    }
    at::Tensor embedded = layers::fourier_features(shifted / size, gaussian_);  // [b, p, n, C]
    const at::Tensor l = labels.unsqueeze(-1);
    embedded = at::where(l == -1, not_a_point_embed_, embedded);
    embedded = at::where(l == -10, at::zeros_like(embedded), embedded);
    embedded = at::where(l == 0, embedded + point_embed_[0], embedded);
    embedded = at::where(l == 1, embedded + point_embed_[1], embedded);
    sparse.push_back(embedded);
  }
  if (boxes.defined()) {
    if (boxes.dim() != 3 || boxes.size(2) != 4 || boxes.size(0) != batch ||
        (points.defined() && boxes.size(1) != points.size(1))) {
      throw Error(str("SAM: input_boxes must be [batch ", batch, ", boxes, 4]",
                      points.defined()
                          ? str(" with as many boxes as point batches (", points.size(1), ")")
                          : std::string(),
                      ", not ", shape_str(boxes.sizes().vec())));
    }
    const at::Tensor corners =
        (boxes.to(gaussian_.scalar_type()) + 0.5).view({batch, boxes.size(1), 2, 2});
    const at::Tensor embedded =
        layers::fourier_features(corners / size, gaussian_);  // [b, nb, 2, C]
    sparse.push_back(at::cat(
        {embedded.narrow(2, 0, 1) + point_embed_[2], embedded.narrow(2, 1, 1) + point_embed_[3]},
        2));
  }
  const int64_t grid = config_.image_embedding_size;
  at::Tensor dense;
  if (masks.defined()) {
    if (masks.dim() != 4 || masks.size(0) != batch || masks.size(1) != 1 ||
        masks.size(2) != 4 * grid || masks.size(3) != 4 * grid) {
      throw Error(str("SAM: input_masks must be [batch ", batch, ", 1, ", 4 * grid, ", ", 4 * grid,
                      "] (a low-resolution mask per image), not ", shape_str(masks.sizes().vec())));
    }
    dense = embed_masks(masks);
  } else {
    dense = no_mask_embed_.view({1, -1, 1, 1}).expand({batch, -1, grid, grid});
  }
  return {.sparse = sparse.empty() ? at::Tensor() : at::cat(sparse, 2), .dense = dense};
}

SamAttention::SamAttention(const BuildContext& ctx, const SamDecoderConfig& c,
                           int64_t downsample_rate) {
  const int64_t internal = c.hidden_size / downsample_rate;
  head_dim_ = internal / c.num_attention_heads;
  const bool split = layers::split_pair(ctx.child("q_proj"), ctx.child("out_proj"));
  heads_ = split
               ? ctx.divide_by_tp(c.num_attention_heads, "mask_decoder_config.num_attention_heads")
               : c.num_attention_heads;
  const auto linear = [&](const char* name, int64_t in, int64_t out) {
    return register_module(name, layers::make_linear(ctx.child(name), in, out));
  };
  q_proj_ = linear("q_proj", c.hidden_size, internal);
  k_proj_ = linear("k_proj", c.hidden_size, internal);
  v_proj_ = linear("v_proj", c.hidden_size, internal);
  out_proj_ = linear("out_proj", internal, c.hidden_size);
}

at::Tensor SamAttention::forward(const at::Tensor& query, const at::Tensor& key,
                                 const at::Tensor& value) {
  const at::Tensor q = layers::split_heads(q_proj_->forward(query), heads_, head_dim_);
  const at::Tensor k = layers::split_heads(k_proj_->forward(key), heads_, head_dim_);
  const at::Tensor v = layers::split_heads(v_proj_->forward(value), heads_, head_dim_);
  layers::AttentionArgs args;
  args.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  return out_proj_->forward(layers::attention(q, k, v, args));  // [n, tq, hidden]
}

SamTwoWayBlock::SamTwoWayBlock(const BuildContext& ctx, const SamDecoderConfig& c, bool first)
    : first_(first) {
  const auto attention = [&](const char* name, int64_t rate) {
    return register_module(name, std::make_shared<SamAttention>(ctx.child(name), c, rate));
  };
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_eps));
  };
  // HF builds the blocks' cross-attentions downsampled 2 x whatever attention_downsample_rate
  // says (SamTwoWayAttentionBlock's own default); only the final attention reads the config.
  constexpr int64_t kBlockDownsample = 2;
  self_attn_ = attention("self_attn", 1);
  norm1_ = norm("layer_norm1");
  token_to_image_ = attention("cross_attn_token_to_image", kBlockDownsample);
  norm2_ = norm("layer_norm2");
  mlp_ = register_module("mlp",
                         make_sam_mlp(ctx.child("mlp"), c.hidden_size, c.mlp_dim, c.hidden_act));
  norm3_ = norm("layer_norm3");
  norm4_ = norm("layer_norm4");
  image_to_token_ = attention("cross_attn_image_to_token", kBlockDownsample);
}

std::pair<at::Tensor, at::Tensor> SamTwoWayBlock::forward(const at::Tensor& queries_in,
                                                          const at::Tensor& keys_in,
                                                          const at::Tensor& query_pe,
                                                          const at::Tensor& key_pe) {
  at::Tensor queries;
  if (first_) {  // replaced, not added to: the tokens carry their positions themselves
    queries = self_attn_->forward(queries_in, queries_in, queries_in);
  } else {
    const at::Tensor q = queries_in + query_pe;
    queries = queries_in + self_attn_->forward(q, q, queries_in);
  }
  queries = norm1_->forward(queries);
  const at::Tensor keys_pe = keys_in + key_pe;
  queries =
      norm2_->forward(queries + token_to_image_->forward(queries + query_pe, keys_pe, keys_in));
  queries = norm3_->forward(queries + mlp_->forward(queries));
  const at::Tensor keys =
      norm4_->forward(keys_in + image_to_token_->forward(keys_pe, queries + query_pe, queries));
  return {queries, keys};
}

SamMaskDecoder::SamMaskDecoder(const BuildContext& ctx, const SamDecoderConfig& c) : config_(c) {
  const int64_t hidden = c.hidden_size, masks = c.num_mask_tokens();
  iou_token_ =
      layers::module_at(*this, "iou_token")
          ->register_parameter("weight", ctx.child("iou_token").load("weight", {1, hidden}));
  mask_tokens_ =
      layers::module_at(*this, "mask_tokens")
          ->register_parameter("weight", ctx.child("mask_tokens").load("weight", {masks, hidden}));
  auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
  const BuildContext t = ctx.child("transformer");
  auto list = transformer->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    blocks_.push_back(list->register_module(
        std::to_string(i),
        std::make_shared<SamTwoWayBlock>(t.child("layers").child(i), c, i == 0)));
  }
  final_attn_ = transformer->register_module(
      "final_attn_token_to_image",
      std::make_shared<SamAttention>(t.child("final_attn_token_to_image"), c,
                                     c.attention_downsample_rate));
  // HF builds this norm with LayerNorm's default eps, 1e-5, and the upscaling one with
  // SamLayerNorm's, 1e-6: not the config's.
  final_norm_ = transformer->register_module(
      "layer_norm_final_attn",
      std::make_shared<layers::LayerNorm>(t.child("layer_norm_final_attn"), hidden, 1e-5));
  const auto upscale = [&](const char* name, int64_t in, int64_t out) {
    return register_module(
        name, std::make_shared<layers::Conv>(
                  ctx.child(name),
                  layers::ConvOptions{
                      .in = in, .out = out, .kernel = {2, 2}, .stride = 2, .transposed = true}));
  };
  upscale_conv1_ = upscale("upscale_conv1", hidden, hidden / 4);
  upscale_conv2_ = upscale("upscale_conv2", hidden / 4, hidden / 8);
  upscale_norm_ = register_module(
      "upscale_layer_norm",
      std::make_shared<layers::LayerNorm>(ctx.child("upscale_layer_norm"), hidden / 4, 1e-6));
  auto mlps = register_module("output_hypernetworks_mlps", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < masks; ++i) {
    hypernetworks_.push_back(mlps->register_module(
        std::to_string(i),
        std::make_shared<layers::PredictionHead>(
            ctx.child("output_hypernetworks_mlps").child(i),
            layers::PredictionHeadOptions{.in = hidden, .hidden = hidden, .out = hidden / 8})));
  }
  iou_head_ = register_module("iou_prediction_head",
                              std::make_shared<layers::PredictionHead>(
                                  ctx.child("iou_prediction_head"),
                                  layers::PredictionHeadOptions{.in = hidden,
                                                                .hidden = c.iou_head_hidden_dim,
                                                                .out = masks,
                                                                .depth = c.iou_head_depth}));
}

SamMaskDecoder::Outputs SamMaskDecoder::forward(const at::Tensor& image, const at::Tensor& image_pe,
                                                const SamPromptEncoder::Embeddings& prompts,
                                                bool multimask) {
  const int64_t batch = image.size(0), hidden = image.size(1), grid = image.size(2);
  const int64_t points = prompts.sparse.defined() ? prompts.sparse.size(1) : 1;
  const int64_t masks = config_.num_mask_tokens();
  at::Tensor tokens = at::cat({iou_token_, mask_tokens_}).expand({batch, points, -1, -1});
  if (prompts.sparse.defined()) tokens = at::cat({tokens, prompts.sparse.to(tokens.dtype())}, 2);
  const at::Tensor query_pe = tokens.reshape({batch * points, -1, hidden});  // [n, tokens, C]
  // Each image once per point batch: [n, grid^2, C].
  const auto per_prompt = [&](const at::Tensor& x) {
    return x.expand({batch, -1, -1, -1}).repeat_interleave(points, 0).flatten(2).transpose(1, 2);
  };
  at::Tensor keys = per_prompt(image + prompts.dense);
  const at::Tensor key_pe = per_prompt(image_pe);
  at::Tensor queries = query_pe;
  for (const auto& block : blocks_) {
    std::tie(queries, keys) = block->forward(queries, keys, query_pe, key_pe);
  }
  queries =
      final_norm_->forward(queries + final_attn_->forward(queries + query_pe, keys + key_pe, keys));
  // The image's tokens to masks 4 x finer: [n, C / 8, 4 grid, 4 grid].
  at::Tensor up = keys.transpose(1, 2).reshape({batch * points, hidden, grid, grid});
  up = at::gelu(layers::channel_norm(*upscale_norm_, upscale_conv1_->forward(up)));
  up = at::gelu(upscale_conv2_->forward(up));
  std::vector<at::Tensor> hyper;
  for (int64_t i = 0; i < masks; ++i) {
    hyper.push_back(hypernetworks_[static_cast<size_t>(i)]->forward(queries.select(1, 1 + i)));
  }
  const int64_t side = up.size(2);
  const at::Tensor all_masks = at::matmul(at::stack(hyper, 1), up.flatten(2))  // [n, masks, side^2]
                                   .view({batch, points, masks, side, side});
  const at::Tensor iou = iou_head_->forward(queries.select(1, 0)).view({batch, points, masks});
  const int64_t first = multimask ? 1 : 0, count = multimask ? masks - 1 : 1;
  return {.masks = all_masks.narrow(2, first, count), .iou_scores = iou.narrow(2, first, count)};
}

}  // namespace shardformer::sam
