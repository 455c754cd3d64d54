// A learned relative position bias over a window of image patches (BEiT, Swin): a table with a
// row per offset between two patches of a Wh x Ww window (BEiT adds three rows for its class
// token) and a column per head, gathered into the bias added to the attention scores.
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <array>
#include <cstdint>

namespace shardformer::layers {

struct RelativePositionTableOptions {
  std::array<int64_t, 2> window{};  // [Wh, Ww] patches
  int64_t num_heads = 0;
  // BEiT: token 0 is the class token, with rows of its own for (class, patch), (patch, class)
  // and (class, class): the table's last three.
  bool class_token = false;
  // The module the table is registered on (Swin's sits in attention.self beside the
  // projections); null: on the RelativePositionTable itself.
  torch::nn::Module* owner = nullptr;
};

class RelativePositionTable : public torch::nn::Module {
 public:
  // ctx: the module holding "relative_position_bias_table" (its "relative_position_index" buffer
  // is computed here, not read). split: each rank holds its heads' columns (tensor parallelism,
  // the attention's heads split); throws ModelError when tp does not divide num_heads.
  RelativePositionTable(const BuildContext& ctx, const RelativePositionTableOptions& options,
                        bool split);
  // [1, heads(/tp), tokens, tokens], added to the scores of a window's tokens.
  at::Tensor bias() const;
  int64_t tokens() const { return tokens_; }  // Wh * Ww (+ 1 with the class token)

 private:
  at::Tensor table_;  // [offsets, heads(/tp)]
  at::Tensor index_;  // [tokens * tokens] int64 on the model's device: each pair's row
  int64_t tokens_ = 0;
};

}  // namespace shardformer::layers
