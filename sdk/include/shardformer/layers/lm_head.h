// The language-model head over the vocabulary: HF's lm_head with a weight of its own
// ("lm_head.weight" [vocab, hidden], tie_word_embeddings = false), or the input embedding
// reused (tied). Either way its logits come as layers::VocabLogits, whole or vocab-parallel.
#pragma once

#include "shardformer/layers/embedding.h"

#include <memory>

namespace shardformer::layers {

// An untied head at ctx.path() ("lm_head"), split as the policy says there: vocab-parallel
// (ColossalAI's VocabParallelLMHead1D, padded like the embedding), embedding-dim parallel or
// replicated. The caller registers it under its HF name.
std::shared_ptr<Embedding> make_lm_head(const BuildContext& ctx, int64_t vocab_size,
                                        int64_t hidden_size);

// A tied head: the input embedding itself. ctx is the head module's context ("lm_head", BERT's
// "cls.predictions.decoder"): a copy of the embedding stored as its "weight" in the checkpoint
// is declared unused, as HF ignores it too.
std::shared_ptr<Embedding> tied_lm_head(const BuildContext& ctx,
                                        std::shared_ptr<Embedding> embedding);

}  // namespace shardformer::layers
