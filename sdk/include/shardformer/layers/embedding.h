// Embedding building blocks (parameter "weight" [num, dim]): replicated, vocabulary-parallel
// (VocabParallelEmbedding1D, vocab padded to make_vocab_size_divisible_by x tp) and
// embedding-dim parallel (Embedding1D). Each can also serve as a tied LM head.
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <memory>
#include <optional>

namespace shardformer::layers {

// Where a vocabulary-parallel LM head's logits go.
enum class LogitsGather {
  kNone,  // each rank keeps its vocabulary slice (for vocab-parallel losses)
  kAll,   // every rank gets the whole vocabulary
  // Rank 0 of the tp group gets the whole vocabulary and the others an undefined tensor (a job
  // that writes the logits out from rank 0); a head that is not vocabulary-parallel returns the
  // whole on every rank.
  kFirstRank,
};

// Logits of an LM head, whole or as this rank's vocabulary slice.
struct VocabLogits {
  at::Tensor logits;        // [..., vocab] or, when parallel, [..., padded_vocab / tp]
  bool parallel = false;    // true: a vocabulary slice; padding columns hold -inf
  int64_t vocab_start = 0;  // first vocabulary id of the slice
  int64_t vocab_size = 0;   // the real vocabulary size
  const distributed::ProcessGroup* group = nullptr;  // set when parallel
};

class Embedding : public torch::nn::Module {
 public:
  // [...] int64 ids -> [..., dim]
  virtual at::Tensor forward(const at::Tensor& ids) = 0;
  // The tied LM head: hidden [..., dim] -> logits over the vocabulary, plus `bias` when given
  // (BERT's decoder bias, split like this embedding's rows: see bias_shard), gathered over the
  // vocabulary as `gather` says.
  virtual VocabLogits lm_logits(const at::Tensor& hidden, LogitsGather gather,
                                const at::Tensor& bias = {}) = 0;
  // How a per-row vector (an LM head's bias [num_embeddings]) must be split to match this
  // embedding's rows on this rank: {} when every rank holds all rows.
  virtual TensorShard bias_shard() const { return {}; }
  int64_t num_embeddings() const { return num_embeddings_; }
  // HF's nn.Embedding(padding_idx=...): lookups of this id give its row no gradient (the tied
  // head still does). Set before the first forward.
  void set_padding_idx(std::optional<int64_t> padding_idx) { padding_idx_ = padding_idx; }

 protected:
  // Throws ModelError when an id is outside [0, num_embeddings), the same at every tp size
  // (a vocabulary-parallel lookup would otherwise return zeros for it).
  void check_ids(const at::Tensor& ids) const;

  explicit Embedding(int64_t num_embeddings) : num_embeddings_(num_embeddings) {}
  // The padding id as an index of this rank's rows starting at `first` (-1: none here).
  int64_t local_padding_idx(int64_t first, int64_t rows) const;

  int64_t num_embeddings_;
  std::optional<int64_t> padding_idx_;
  at::Tensor weight_;
};

class ReplicatedEmbedding : public Embedding {
 public:
  ReplicatedEmbedding(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim);
  at::Tensor forward(const at::Tensor& ids) override;
  VocabLogits lm_logits(const at::Tensor& hidden, LogitsGather gather,
                        const at::Tensor& bias = {}) override;
};

// Rows [start, start + padded/tp) of the padded vocabulary on each rank; ids outside the
// slice look up zeros, and the partial results are all-reduced.
class VocabParallelEmbedding1D : public Embedding {
 public:
  VocabParallelEmbedding1D(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim);
  at::Tensor forward(const at::Tensor& ids) override;
  VocabLogits lm_logits(const at::Tensor& hidden, LogitsGather gather,
                        const at::Tensor& bias = {}) override;
  TensorShard bias_shard() const override { return {.dim = 0, .padded_size = padded_rows_}; }

 private:
  const distributed::ProcessGroup* group_;
  int64_t vocab_start_, local_rows_, padded_rows_;
};

// Columns [rank * dim/tp, (rank + 1) * dim/tp) on each rank; outputs all-gathered.
class Embedding1D : public Embedding {
 public:
  Embedding1D(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim);
  at::Tensor forward(const at::Tensor& ids) override;
  VocabLogits lm_logits(const at::Tensor& hidden, LogitsGather gather,
                        const at::Tensor& bias = {}) override;

 private:
  const distributed::ProcessGroup* group_;
};

// The embedding block the policy names for ctx.path().
std::shared_ptr<Embedding> make_embedding(const BuildContext& ctx, int64_t num_embeddings,
                                          int64_t embedding_dim);

}  // namespace shardformer::layers
