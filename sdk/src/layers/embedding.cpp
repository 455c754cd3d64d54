// Replicated, vocabulary-parallel and embedding-dim-parallel embeddings and tied LM heads.
#include "shardformer/layers/embedding.h"

#include "inference_kernels.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

namespace shardformer::layers {

void Embedding::check_ids(const at::Tensor& ids) const {
  if (ids.numel() == 0) return;
  const int64_t low = ids.min().item<int64_t>(), high = ids.max().item<int64_t>();
  if (low < 0 || high >= num_embeddings_) {
    throw ModelError(str("id ", low < 0 ? low : high, " is outside the embedding table [0, ",
                         num_embeddings_, ")"));
  }
}

int64_t Embedding::local_padding_idx(int64_t first, int64_t rows) const {
  if (!padding_idx_ || *padding_idx_ < first || *padding_idx_ >= first + rows) return -1;
  return *padding_idx_ - first;
}

ReplicatedEmbedding::ReplicatedEmbedding(const BuildContext& ctx, int64_t num_embeddings,
                                         int64_t embedding_dim)
    : Embedding(num_embeddings) {
  weight_ = register_parameter("weight", ctx.load("weight", {num_embeddings, embedding_dim}));
}

at::Tensor ReplicatedEmbedding::forward(const at::Tensor& ids) {
  check_ids(ids);
  return at::embedding(weight_, ids, local_padding_idx(0, num_embeddings_));
}

VocabLogits ReplicatedEmbedding::lm_logits(const at::Tensor& hidden, LogitsGather,
                                           const at::Tensor& bias) {
  const at::Tensor logits = project(hidden, weight_, {}, false);  // [..., vocab]
  return {bias.defined() ? logits + bias : logits, false, 0, num_embeddings_, nullptr};
}

VocabParallelEmbedding1D::VocabParallelEmbedding1D(const BuildContext& ctx, int64_t num_embeddings,
                                                   int64_t embedding_dim)
    : Embedding(num_embeddings), group_(ctx.parallel()->tp) {
  padded_rows_ = padded_vocab_size(
      num_embeddings, ctx.parallel()->config.make_vocab_size_divisible_by, ctx.tp_size());
  const TensorShard shard{.dim = 0, .padded_size = padded_rows_};
  weight_ =
      register_parameter("weight", ctx.load("weight", {num_embeddings, embedding_dim}, shard));
  local_rows_ = weight_.size(0);
  vocab_start_ = ctx.tp_rank() * local_rows_;
}

at::Tensor VocabParallelEmbedding1D::forward(const at::Tensor& ids) {
  check_ids(ids);
  const at::Tensor outside = (ids < vocab_start_) | (ids >= vocab_start_ + local_rows_);
  const at::Tensor local_ids = (ids - vocab_start_).masked_fill(outside, 0);
  const at::Tensor partial =  // [..., dim], zeros for ids other ranks hold
      at::embedding(weight_, local_ids, local_padding_idx(vocab_start_, local_rows_))
          .masked_fill(outside.unsqueeze(-1), 0.0);
  return distributed::reduce_from_parallel_region(partial, *group_);
}

namespace {

// Whether gathered logits are computed in place (gathered_in_place).
bool gathers_in_place(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return gemm_into_collective(x, weight) && (!bias.defined() || kernel_layout(bias));
}

// x [..., dim] times this rank's rows of the vocabulary (weight [padded/tp, dim], from `start`)
// straight into its columns of the gathered logits [..., padded], which the all-gather fills in
// around them: this rank's block is neither a tensor of its own nor copied back. first_only:
// only rank 0 receives the logits (the others return undefined), and every rank's product
// goes straight into them where they can live in shared memory.
at::Tensor gathered_in_place(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             int64_t padded, int64_t start, int64_t real,
                             const distributed::ProcessGroup& group, bool first_only) {
  const int64_t local = weight.size(0);
  const at::Tensor rows = x.reshape({-1, x.size(-1)});  // [tokens, dim]
  const auto produce = [&](const at::Tensor& mine) {    // [tokens, padded/tp]
    kernels::gemm(rows, weight.t(), bias, false, mine);
    if (real < local)
      mine.narrow(1, real, local - real).fill_(-std::numeric_limits<double>::infinity());
  };
  auto shape = x.sizes().vec();
  shape.back() = padded;
  if (first_only) {
    const at::Tensor whole =
        group.gather_produced_to_first(rows.size(0), local, x.options(), produce);
    return whole.defined() ? whole.view(shape) : whole;  // [..., padded] on rank 0
  }
  at::Tensor full = at::empty(shape, x.options());  // [..., padded]
  produce(full.view({-1, padded}).narrow(1, start, local));
  group.all_gather_in_place(full, -1);
  return full;
}

}  // namespace

VocabLogits VocabParallelEmbedding1D::lm_logits(const at::Tensor& hidden, LogitsGather gather,
                                                const at::Tensor& bias) {
  const at::Tensor x = distributed::copy_to_parallel_region(hidden, *group_);
  const int64_t real = std::clamp<int64_t>(num_embeddings_ - vocab_start_, 0, local_rows_);
  if (gather != LogitsGather::kNone && gathers_in_place(x, weight_, bias)) {
    const at::Tensor full = gathered_in_place(x, weight_, bias, padded_rows_, vocab_start_, real,
                                              *group_, gather == LogitsGather::kFirstRank);
    return {full.defined() ? full.narrow(-1, 0, num_embeddings_) : full, false, 0, num_embeddings_,
            nullptr};
  }
  at::Tensor local = project(x, weight_, {}, false);  // [..., padded/tp]
  if (bias.defined()) local = local + bias;           // bias: [padded/tp], this rank's rows
  if (real < local_rows_) {  // padding columns must never win a max or take probability
    // In place: the product's own output (its backward needs only its inputs), no copy of
    // this rank's [tokens, padded/tp] logits; the filled columns get no gradient.
    local.narrow(-1, real, local_rows_ - real).fill_(-std::numeric_limits<double>::infinity());
  }
  if (gather == LogitsGather::kNone) return {local, true, vocab_start_, num_embeddings_, group_};
  const at::Tensor full = distributed::gather_from_parallel_region(local, *group_);
  // kFirstRank's contract holds on this path too: the others gathered, but keep nothing.
  if (gather == LogitsGather::kFirstRank && group_->rank() != 0) {
    return {at::Tensor(), false, 0, num_embeddings_, nullptr};
  }
  return {full.narrow(-1, 0, num_embeddings_), false, 0, num_embeddings_, nullptr};
}

Embedding1D::Embedding1D(const BuildContext& ctx, int64_t num_embeddings, int64_t embedding_dim)
    : Embedding(num_embeddings), group_(ctx.parallel()->tp) {
  ctx.divide_by_tp(embedding_dim, ctx.name_of("embedding_dim"));
  weight_ = register_parameter(
      "weight", ctx.load("weight", {num_embeddings, embedding_dim}, TensorShard{.dim = 1}));
}

at::Tensor Embedding1D::forward(const at::Tensor& ids) {
  check_ids(ids);
  return distributed::gather_from_parallel_region(
      at::embedding(weight_, ids, local_padding_idx(0, num_embeddings_)), *group_);
}

VocabLogits Embedding1D::lm_logits(const at::Tensor& hidden, LogitsGather, const at::Tensor& bias) {
  const at::Tensor x = distributed::scatter_to_parallel_region(hidden, *group_);  // [..., dim/tp]
  const at::Tensor logits =                                                       // [..., vocab]
      distributed::reduce_from_parallel_region(project(x, weight_, {}, false), *group_);
  return {bias.defined() ? logits + bias : logits, false, 0, num_embeddings_, nullptr};
}

std::shared_ptr<Embedding> make_embedding(const BuildContext& ctx, int64_t num_embeddings,
                                          int64_t embedding_dim) {
  const ShardStyle style = ctx.style();
  switch (style.kind) {
    case ShardKind::kReplicate:
      return std::make_shared<ReplicatedEmbedding>(ctx, num_embeddings, embedding_dim);
    case ShardKind::kVocab:
      return std::make_shared<VocabParallelEmbedding1D>(ctx, num_embeddings, embedding_dim);
    case ShardKind::kEmbeddingDim:
      return std::make_shared<Embedding1D>(ctx, num_embeddings, embedding_dim);
    default:
      throw ModelError(str(ctx.path(), ": an embedding cannot take shard style '",
                           shard_kind_name(style.kind), "'"));
  }
}

}  // namespace shardformer::layers
