// SamModel's forward: the image encoded once, the prompts embedded, masks decoded per prompt.
#include "sam_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::sam {

SamModel::SamModel(const BuildContext& ctx, const SamConfig& c) : config_(c) {
  bind(ctx);
  gaussian_ = layers::module_at(*this, "shared_image_embedding")
                  ->register_parameter(
                      "positional_embedding",
                      ctx.child("shared_image_embedding")
                          .load("positional_embedding", {2, c.vision.output_channels / 2}));
  vision_encoder_ = register_module(
      "vision_encoder", std::make_shared<SamVisionEncoder>(ctx.child("vision_encoder"), c.vision));
  prompt_encoder_ = register_module(
      "prompt_encoder",
      std::make_shared<SamPromptEncoder>(ctx.child("prompt_encoder"), c.prompt, gaussian_));
  mask_decoder_ = register_module(
      "mask_decoder", std::make_shared<SamMaskDecoder>(ctx.child("mask_decoder"), c.decoder));
}

at::Tensor SamModel::image_positions() const {
  const int64_t grid = config_.prompt.image_embedding_size;
  const at::Tensor centres =
      (at::arange(grid, gaussian_.options()) + 0.5) / static_cast<double>(grid);  // [grid]
  const at::Tensor xy = at::stack(
      {centres.view({1, grid}).expand({grid, grid}), centres.view({grid, 1}).expand({grid, grid})},
      -1);  // [grid, grid, 2]: (x, y)
  return layers::fourier_features(xy, gaussian_).permute({2, 0, 1}).unsqueeze(0);
}

std::map<std::string, at::Tensor> SamModel::forward_all(const ForwardInputs& inputs) {
  const at::Tensor& pixels = inputs.pixel_values;
  if (!pixels.defined()) {
    throw Error(
        "SAM reads pixel_values [batch, channels, height, width] and prompts (input_points, "
        "input_boxes), not token ids");
  }
  const at::Tensor image = vision_encoder_->forward(pixels);  // [batch, C, grid, grid]
  const SamPromptEncoder::Embeddings prompts =
      prompt_encoder_->forward(inputs.input_points, inputs.input_labels, inputs.input_boxes,
                               inputs.input_masks, image.size(0));
  const SamMaskDecoder::Outputs out =
      mask_decoder_->forward(image, image_positions(), prompts, inputs.multimask_output);
  return {{"pred_masks", out.masks}, {"iou_scores", out.iou_scores}, {"image_embeddings", image}};
}

at::Tensor SamModel::forward(const ForwardInputs& inputs) {
  return forward_all(inputs).at("pred_masks");
}

ModelShape SamModel::shape() const {
  const SamVisionConfig& v = config_.vision;
  return ModelShape{.num_layers = v.num_hidden_layers,
                    .num_heads = v.num_attention_heads,
                    .head_dim = v.head_dim(),
                    .hidden_size = v.hidden_size,
                    .vocab_size = 0,
                    .max_positions = 0};
}

}  // namespace shardformer::sam
