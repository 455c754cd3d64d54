// BLIP-2's Q-Former (HF Blip2QFormerModel) as the captioning model runs it: learned query tokens,
// normed, through BERT-like post-LN layers (layers::PostNormEncoderBlock) whose queries attend
// to each other, every cross_attention_frequency-th layer also to the image features, then a
// query-only feed-forward.
#pragma once

#include "blip2_config.h"
#include "shardformer/build_context.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/post_norm_block.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::blip2 {

class Blip2QFormerModel : public torch::nn::Module {
 public:
  Blip2QFormerModel(const BuildContext& ctx, const Blip2QFormerConfig& config);
  // queries [batch, queries, hidden] attending to image [batch, tokens, vision hidden] -> the
  // last hidden state [batch, queries, hidden]
  at::Tensor forward(const at::Tensor& queries, const at::Tensor& image);

 private:
  std::shared_ptr<layers::LayerNorm> layernorm_;
  std::shared_ptr<layers::Dropout> dropout_;
  layers::LayerStack<layers::PostNormEncoderBlock>
      layers_;  // BERT-like, under the Q-Former's names
};

}  // namespace shardformer::blip2
