// The post-norm encoder block of BERT-style models (BERT, RoBERTa, ERNIE, ALBERT, BLIP-2's
// Q-Former): h = norm(x + dropout(self_attn(x))), with cross-attention h = norm(h + dropout(
// cross_attn(h, memory))), then norm(h + dropout(ff(h))), its modules under the family's names.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/cross_attention.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/self_attention.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

// Where a block keeps its parts, as module paths under the block (dotted ones nest). The
// defaults are BERT's; the q / k / v / out names are under `attention` (and `cross`).
struct PostNormNames {
  std::string attention = "attention";
  std::string query = "self.query", key = "self.key", value = "self.value", out = "output.dense";
  std::string attention_norm = "attention.output.LayerNorm";
  std::string attention_dropout = "attention.output.dropout";
  std::string cross = "crossattention";  // its q / k / v / out under the same names as attention's
  std::string cross_norm = "crossattention.output.LayerNorm";
  std::string cross_dropout = "crossattention.output.dropout";
  std::string intermediate = "intermediate.dense", output = "output.dense";
  std::string output_norm = "output.LayerNorm", output_dropout = "output.dropout";
};

struct PostNormBlockOptions {
  int64_t hidden_size = 0, num_heads = 0, intermediate_size = 0;
  Activation activation = Activation::kGelu;
  double layer_norm_eps = 1e-12;
  double hidden_dropout = 0, attention_dropout = 0;  // after each sublayer; on the probabilities
  int64_t memory_size = 0;  // > 0: cross-attention to a memory this wide (the Q-Former's image)
  PostNormNames names;
};

class PostNormEncoderBlock : public torch::nn::Module {
 public:
  // ctx: the block's module ("encoder.layer.3"). Attention heads and the MLP are split over tp
  // as the policy says for names.query / names.out and names.intermediate / names.output.
  PostNormEncoderBlock(const BuildContext& ctx, const PostNormBlockOptions& options,
                       int64_t layer_idx);
  // x [batch, seq, hidden] -> same. step.self: the mask; step.memory / memory_mask: what
  // cross-attention reads (a block built with memory_size > 0 needs step.memory).
  at::Tensor forward(const at::Tensor& x, const EncoderDecoderStep& step);

 private:
  std::shared_ptr<SelfAttention> attention_;
  std::shared_ptr<CrossAttention> cross_;  // null without memory_size
  std::shared_ptr<MLP> mlp_;               // registered on the block under its two names
  std::shared_ptr<LayerNorm> attention_norm_, cross_norm_, output_norm_;
  std::shared_ptr<Dropout> attention_dropout_, cross_dropout_, output_dropout_;
};

}  // namespace shardformer::layers
