// BLIP-2's Q-Former (HF Blip2QFormerModel) as the captioning model runs it: learned query tokens,
// normed, through BERT-like post-LN layers whose queries attend to each other, every
// cross_attention_frequency-th layer also to the image features, then a query-only feed-forward.
#pragma once

#include "blip2_config.h"
#include "shardformer/build_context.h"
#include "shardformer/layers/cross_attention.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/self_attention.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::blip2 {

// h = attention.output.LayerNorm(x + dropout(self-attention(x)));
// h = crossattention.output.LayerNorm(h + dropout(cross-attention(h, image)))  (some layers);
// out = output_query.LayerNorm(h + dropout(output_query(act(intermediate_query(h))))).
class Blip2QFormerLayer : public torch::nn::Module {
 public:
  Blip2QFormerLayer(const BuildContext& ctx, const Blip2QFormerConfig& config, int64_t layer_idx);
  // x [batch, queries, hidden], step.memory the image features [batch, tokens, vision hidden]
  // -> [batch, queries, hidden]
  at::Tensor forward(const at::Tensor& x, const layers::EncoderDecoderStep& step);

 private:
  std::shared_ptr<layers::SelfAttention> attention_;
  std::shared_ptr<layers::CrossAttention> crossattention_;  // null where the layer has none
  std::shared_ptr<layers::MLP> feed_forward_;  // intermediate_query.dense, output_query.dense
  std::shared_ptr<layers::LayerNorm> attention_norm_, cross_norm_, output_norm_;
  std::shared_ptr<layers::Dropout> attention_dropout_, cross_dropout_, output_dropout_;
};

class Blip2QFormerModel : public torch::nn::Module {
 public:
  Blip2QFormerModel(const BuildContext& ctx, const Blip2QFormerConfig& config);
  // queries [batch, queries, hidden] attending to image [batch, tokens, vision hidden] -> the
  // last hidden state [batch, queries, hidden]
  at::Tensor forward(const at::Tensor& queries, const at::Tensor& image);

 private:
  std::shared_ptr<layers::LayerNorm> layernorm_;
  std::shared_ptr<layers::Dropout> dropout_;
  layers::LayerStack<Blip2QFormerLayer> layers_;
};

}  // namespace shardformer::blip2
