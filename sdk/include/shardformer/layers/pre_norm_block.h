// The pre-norm residual block of encoder and encoder-decoder families (ViT and BEiT, Whisper,
// T5): x + dropout(self_attn(norm(x))), in a decoder x + dropout(cross_attn(norm(x), memory)),
// then x + dropout(ff(norm(x))). The family builds and registers the modules under its own names.
#pragma once

#include "shardformer/layers/cross_attention.h"
#include "shardformer/layers/drop_path.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/layers/gated_mlp.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/layers/self_attention.h"

#include <ATen/Tensor.h>

namespace shardformer::layers {

// A block's sublayers, owned (registered) by the family's layer module. Null dropouts drop
// nothing; the cross-attention trio is a decoder's. The feed-forward is one of mlp and gated_mlp.
struct PreNormSublayers {
  const ResidualNorm* self_norm = nullptr;  // LayerNorm or RMSNorm, before self-attention
  SelfAttention* self_attn = nullptr;
  Dropout* self_dropout = nullptr;
  const ResidualNorm* cross_norm = nullptr;  // before cross-attention
  CrossAttention* cross_attn = nullptr;
  Dropout* cross_dropout = nullptr;
  const ResidualNorm* ff_norm = nullptr;  // before the feed-forward
  MLP* mlp = nullptr;
  GatedMLP* gated_mlp = nullptr;
  Dropout* ff_dropout = nullptr;
  // BEiT's layer scale [hidden]: each branch's output scaled before its residual add (then the
  // add and the next norm are separate ops). Undefined: no scale.
  at::Tensor self_scale, ff_scale;
  // BEiT's stochastic depth: each branch of an encoder block, after its layer scale, dropped per
  // sample in training (one module for both branches, as in HF). Null: none.
  DropPath* drop_path = nullptr;
};

// [batch, seq, hidden] -> same. Without layer scale each sum is normed by the next sublayer's
// norm in the pass that adds it (forward_residual: joined to the row-parallel all-reduce under
// tensor parallelism). Throws ModelError for a combination the struct's comments exclude.
at::Tensor pre_norm_block(const PreNormSublayers& sublayers, const at::Tensor& x,
                          const EncoderDecoderStep& step);

// A sublayer's output through its dropout, or unchanged where it has none (null): for a block
// that composes the sublayers itself (T5 in fp16).
at::Tensor sublayer_dropout(Dropout* dropout, const at::Tensor& x);

}  // namespace shardformer::layers
