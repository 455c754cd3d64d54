// Embedding building block.
#include "shardformer/layers/embedding.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

Embedding::Embedding(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  weight_ = register_parameter("weight", ctx.load("weight", {num_embeddings, embedding_dim}));
}

at::Tensor Embedding::forward(const at::Tensor& ids) const { return at::embedding(weight_, ids); }

}  // namespace shardformer::layers
