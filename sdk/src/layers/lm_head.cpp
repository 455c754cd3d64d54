// Tied and untied language-model heads.
#include "shardformer/layers/lm_head.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

namespace shardformer::layers {

std::shared_ptr<Embedding> make_lm_head(const BuildContext& ctx, int64_t vocab_size,
                                        int64_t hidden_size) {
  const ShardKind kind = ctx.style().kind;
  if (kind != ShardKind::kReplicate && kind != ShardKind::kVocab &&
      kind != ShardKind::kEmbeddingDim) {
    throw ModelError(str(ctx.path(), ": an LM head cannot take shard style '",
                         shard_kind_name(kind), "' (vocab, embedding_dim or replicate)"));
  }
  return make_embedding(ctx, vocab_size, hidden_size);
}

std::shared_ptr<Embedding> tied_lm_head(const BuildContext& ctx,
                                        std::shared_ptr<Embedding> embedding) {
  if (!embedding) throw ModelError(str(ctx.path(), ": a tied LM head needs the input embedding"));
  ctx.skip("weight", "the head is tied to the input embedding (tie_word_embeddings = true)");
  return embedding;
}

}  // namespace shardformer::layers
