// Embedding building block (token or position table); parameter name "weight" [num, dim].
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

namespace shardformer::layers {

class Embedding : public torch::nn::Module {
 public:
  Embedding(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim);

  // [...] int64 ids -> [..., dim]
  at::Tensor forward(const at::Tensor& ids) const;

  const at::Tensor& weight() const { return weight_; }
  int64_t num_embeddings() const { return num_embeddings_; }

 private:
  int64_t num_embeddings_, embedding_dim_;
  at::Tensor weight_;
};

}  // namespace shardformer::layers
