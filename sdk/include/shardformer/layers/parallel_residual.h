// The parallel residual block of GPT-J, GPT-NeoX and Falcon: attention and MLP read norms of the
// same input x and both add to it, x + attention(a) + mlp(m), where a sequential block's MLP
// reads the norm of x + attention(a). Written once for every such family.
#pragma once

#include "shardformer/layers/dropout.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/self_attention.h"

namespace shardformer::layers {

// x + dropout(attention(a)) + dropout(mlp(m)) and, given `next`, its norm (the next layer's
// input norm, in the pass of the MLP's all-reduce). Attention: SelfAttention or
// FusedQKVAttention.
template <typename Attention>
ResidualSum parallel_residual(Attention& attention, const at::Tensor& a, const AttentionStep& step,
                              MLP& mlp, const at::Tensor& m, const at::Tensor& x,
                              const ResidualNorm* next, Dropout* attention_dropout = nullptr,
                              Dropout* mlp_dropout = nullptr) {
  const ResidualSum h = attention.forward_residual(a, step, x, nullptr, attention_dropout);
  return mlp.forward_residual(m, h.sum, next, mlp_dropout, step.sequence.get());
}

// The sequential block: h = x + dropout(attention(a)), then h + dropout(mlp(norm(h))), with
// `norm` (the MLP's input norm) taken in the attention's residual pass.
template <typename Attention>
ResidualSum sequential_residual(Attention& attention, const at::Tensor& a,
                                const AttentionStep& step, const ResidualNorm& norm, MLP& mlp,
                                const at::Tensor& x, const ResidualNorm* next,
                                Dropout* attention_dropout = nullptr,
                                Dropout* mlp_dropout = nullptr) {
  const ResidualSum h = attention.forward_residual(a, step, x, &norm, attention_dropout);
  return mlp.forward_residual(h.normed, h.sum, next, mlp_dropout, step.sequence.get());
}

}  // namespace shardformer::layers
