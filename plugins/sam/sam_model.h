// SAM (HF SamModel): the image encoder, the prompt encoder sharing the model's Gaussian matrix
// of positions, and the mask decoder. Tensor parallel in the image encoder's layers and the mask
// decoder's attentions and MLPs; not pipeline parallel (its config has no top-level layer count
// to split) or sequence parallel (its policy lists no mode): the SDK refuses both.
#pragma once

#include "sam_decoder.h"
#include "sam_vision.h"

#include "shardformer/build_context.h"
#include "shardformer/model.h"

#include <map>
#include <memory>
#include <string>

namespace shardformer::sam {

class SamModel : public Model {
 public:
  SamModel(const BuildContext& ctx, const SamConfig& config);
  // pixel_values [batch, channels, image_size, image_size] and the prompts of ForwardInputs ->
  // pred_masks [batch, point_batch, masks, 4 grid, 4 grid] (logits of the low-resolution masks)
  at::Tensor forward(const ForwardInputs& inputs) override;
  // pred_masks, iou_scores [batch, point_batch, masks] and image_embeddings [batch,
  // output_channels, grid, grid].
  std::map<std::string, at::Tensor> forward_all(const ForwardInputs& inputs) override;
  ModelShape shape() const override;
  std::string output_name() const override { return "pred_masks"; }

 private:
  // The Fourier features of every patch centre: [1, output_channels, grid, grid].
  at::Tensor image_positions() const;

  SamConfig config_;
  at::Tensor gaussian_;  // shared_image_embedding.positional_embedding [2, output_channels / 2]
  std::shared_ptr<SamVisionEncoder> vision_encoder_;
  std::shared_ptr<SamPromptEncoder> prompt_encoder_;
  std::shared_ptr<SamMaskDecoder> mask_decoder_;
};

}  // namespace shardformer::sam
