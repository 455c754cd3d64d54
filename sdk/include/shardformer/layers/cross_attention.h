// Cross-attention of an encoder-decoder model's decoder: queries from the decoder's hidden
// states, keys and values projected from the encoder's output once per generation and cached.
// Under tensor parallelism q / k / v are column-parallel by heads and the output row-parallel.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/kv_cache.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

struct CrossAttentionOptions {
  int64_t hidden_size = 0;  // the decoder's, which q reads and the output projection writes
  int64_t memory_size = 0;  // the encoder output's, which k and v read (0: hidden_size)
  int64_t num_heads = 0, head_dim = 0;
  bool q_bias = false, k_bias = false, v_bias = false, out_bias = false;
  double scale = 0;            // 0: head_dim^-0.5 (T5: 1)
  bool scale_queries = false;  // multiply q by the scale before q . k (Whisper), not the scores
  double dropout = 0;          // on the attention probabilities, in training
  // Module paths under the attention's own (dotted ones nest: BLIP-2's "attention.query" and
  // "output.dense").
  std::string q_name = "q_proj", k_name = "k_proj", v_name = "v_proj", out_name = "out_proj";
};

// The encoder's padding [batch, src] of 0/1 as cross-attention's mask [batch, 1, 1, src] of
// bool (true = attend); undefined for undefined padding (every source token real).
at::Tensor memory_mask(const at::Tensor& padding);

class CrossAttention : public torch::nn::Module {
 public:
  // ctx: the attention's module ("decoder.block.0.layer.1.EncDecAttention"); layer_idx: the
  // decoder layer, its slot in the cross-attention cache.
  CrossAttention(const BuildContext& ctx, const CrossAttentionOptions& options, int64_t layer_idx);

  // x [batch, tgt, hidden] attending to memory [batch, src, memory_size] (the encoder's output,
  // not read once `cache` holds this layer's keys and values), mask from memory_mask() ->
  // [batch, tgt, hidden]. cache: null, or the generation's cross-attention cache, filled at
  // the first call.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& memory, const at::Tensor& mask,
                     KVCache* cache);
  // residual + dropout(forward(...)) and, given `norm`, its norm (add_to_residual).
  ResidualSum forward_residual(const at::Tensor& x, const at::Tensor& memory,
                               const at::Tensor& mask, KVCache* cache, const at::Tensor& residual,
                               const ResidualNorm* norm, Dropout* dropout = nullptr);

 private:
  // The heads' outputs before the output projection: [batch, tgt, heads/tp * head_dim].
  at::Tensor attend(const at::Tensor& x, const at::Tensor& memory, const at::Tensor& mask,
                    KVCache* cache);

  int64_t layer_idx_, heads_, head_dim_;  // heads_: this rank's
  double scale_;
  bool scale_queries_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace shardformer::layers
