// Self-attention whose q, k and v come from one projection with rows [3, heads, head_dim] (the
// "qkv" of SAM's image encoder and BLIP-2's vision encoder) and an output projection. Under
// tensor parallelism qkv is column-parallel by heads (the policy's column style with
// fused_blocks 3: each rank its heads' q, k and v) and the output row-parallel.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/self_attention.h"

#include <torch/nn/module.h>

#include <array>
#include <memory>
#include <string>

namespace shardformer::layers {

struct StackedQKVOptions {
  int64_t hidden_size = 0, num_heads = 0;
  bool qkv_bias = true;
  double dropout = 0;                               // on the attention probabilities, in training
  std::string qkv_name = "qkv", out_name = "proj";  // BLIP-2: "projection"
  std::string heads_key = "num_attention_heads";    // named when tp does not divide the heads
};

class StackedQKVAttention : public torch::nn::Module {
 public:
  // ctx: the attention's module ("vision_encoder.layers.0.attn"), whose children qkv and the
  // output projection are.
  StackedQKVAttention(const BuildContext& ctx, const StackedQKVOptions& options, int64_t layer_idx);
  // x [batch, tokens, hidden] -> q, k, v [batch, heads/tp, tokens, head_dim]
  std::array<at::Tensor, 3> project(const at::Tensor& x) const;
  // The heads' attention with args' mask and bias (the layer's scale, dropout and index are
  // set here): [batch, tokens, heads/tp * head_dim].
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    AttentionArgs args) const;
  // [batch, tokens, heads/tp * head_dim] -> [batch, tokens, hidden] (summed over tp)
  at::Tensor output(const at::Tensor& attended) const;
  // project, attend with the step's mask and bias, output: [batch, tokens, hidden] -> same
  at::Tensor forward(const at::Tensor& x, const AttentionStep& step) const;
  int64_t num_heads() const { return heads_; }  // this rank's
  int64_t head_dim() const { return head_dim_; }
  bool split() const { return split_; }

 private:
  int64_t layer_idx_, heads_, head_dim_;
  bool split_;
  std::shared_ptr<Linear> qkv_, out_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace shardformer::layers
