// SAM's prompt encoder and mask decoder (HF SamPromptEncoder, SamMaskDecoder): points and boxes
// to sparse prompt tokens; the two-way transformer between those tokens and the image
// embeddings; upscaled mask features read by a hypernetwork per mask token, and the IoU head.
// Shapes are per rank.
#pragma once

#include "sam_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/conv.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/prediction_head.h"

#include <torch/nn/module.h>

#include <memory>
#include <vector>

namespace shardformer::sam {

// HF SamPromptEncoder (prompt_encoder): the Gaussian matrix is SamModel's shared one.
class SamPromptEncoder : public torch::nn::Module {
 public:
  SamPromptEncoder(const BuildContext& ctx, const SamPromptConfig& config, at::Tensor gaussian);
  struct Embeddings {
    at::Tensor sparse;  // [batch, point_batch, tokens, hidden]; undefined without prompts
    at::Tensor dense;   // [batch, hidden, grid, grid]
  };
  // points [batch, point_batch, n, 2] with labels [batch, point_batch, n], boxes [batch,
  // boxes, 4], masks [batch, 1, 4 grid, 4 grid], each undefined when absent; batch: the images'.
  Embeddings forward(const at::Tensor& points, const at::Tensor& labels, const at::Tensor& boxes,
                     const at::Tensor& masks, int64_t batch) const;

 private:
  // HF SamMaskEmbedding: masks [batch, 1, 4 grid, 4 grid] -> [batch, hidden, grid, grid] through
  // two strided convolutions (each with a channel layernorm and the activation) and a 1 x 1 one.
  at::Tensor embed_masks(const at::Tensor& masks) const;

  SamPromptConfig config_;
  std::shared_ptr<layers::Conv> mask_convs_[3];  // mask_embed.conv1..3
  std::shared_ptr<layers::LayerNorm> mask_norm1_, mask_norm2_;
  at::Tensor gaussian_;                           // [2, hidden / 2]
  at::Tensor no_mask_embed_, not_a_point_embed_;  // [1, hidden]
  std::vector<at::Tensor> point_embed_;           // 4 x [1, hidden]: labels 0, 1; box corners
};

// HF SamAttention: q, k, v projected to hidden / downsample_rate features in heads, attended,
// projected back. Under tensor parallelism q / k / v are column-parallel by heads and out_proj
// row-parallel.
class SamAttention : public torch::nn::Module {
 public:
  SamAttention(const BuildContext& ctx, const SamDecoderConfig& config, int64_t downsample_rate);
  // query [n, tq, hidden], key and value [n, tk, hidden] -> [n, tq, hidden]
  at::Tensor forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value);

 private:
  int64_t heads_, head_dim_;  // heads_: this rank's
  std::shared_ptr<layers::Linear> q_proj_, k_proj_, v_proj_, out_proj_;
};

// HF SamTwoWayAttentionBlock (mask_decoder.transformer.layers.<i>): the tokens' self-attention,
// tokens to image, the tokens' MLP, image to tokens; a layernorm after each.
class SamTwoWayBlock : public torch::nn::Module {
 public:
  SamTwoWayBlock(const BuildContext& ctx, const SamDecoderConfig& config, bool first);
  // queries [n, tokens, hidden], keys [n, grid^2, hidden] and their positional embeddings
  // (query_pe: the prompt tokens themselves) -> {queries, keys}
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& queries, const at::Tensor& keys,
                                            const at::Tensor& query_pe, const at::Tensor& key_pe);

 private:
  bool first_;  // the first block's self-attention adds no positional embedding
  std::shared_ptr<SamAttention> self_attn_, token_to_image_, image_to_token_;
  std::shared_ptr<layers::LayerNorm> norm1_, norm2_, norm3_, norm4_;
  std::shared_ptr<layers::MLP> mlp_;
};

// HF SamMaskDecoder: masks [batch, point_batch, masks, 4 grid, 4 grid] and IoU scores [batch,
// point_batch, masks]; masks: num_multimask_outputs with multimask, else 1.
class SamMaskDecoder : public torch::nn::Module {
 public:
  SamMaskDecoder(const BuildContext& ctx, const SamDecoderConfig& config);
  struct Outputs {
    at::Tensor masks, iou_scores;
  };
  // image [batch, hidden, grid, grid], image_pe [1, hidden, grid, grid], prompts from the
  // prompt encoder.
  Outputs forward(const at::Tensor& image, const at::Tensor& image_pe,
                  const SamPromptEncoder::Embeddings& prompts, bool multimask);

 private:
  SamDecoderConfig config_;
  at::Tensor iou_token_, mask_tokens_;  // [1, hidden], [masks + 1, hidden]
  std::vector<std::shared_ptr<SamTwoWayBlock>> blocks_;
  std::shared_ptr<SamAttention> final_attn_;
  std::shared_ptr<layers::LayerNorm> final_norm_, upscale_norm_;
  std::shared_ptr<layers::Conv> upscale_conv1_, upscale_conv2_;  // transposed, 2 x 2 stride 2
  std::vector<std::shared_ptr<layers::PredictionHead>> hypernetworks_;
  std::shared_ptr<layers::PredictionHead> iou_head_;
};

}  // namespace shardformer::sam
