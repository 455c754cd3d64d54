// Sequence parallelism's layout of one forward pass: the sequence padded at its end to a multiple
// of the sequence group (twice that for ring attention's zig-zag chunks), the tokens each rank
// holds, and the autograd functions that split the hidden states after the embeddings and
// gather them again before the final norm and head.
#pragma once

#include "shardformer/parallel/policy.h"

#include <ATen/Tensor.h>

#include <cstdint>

namespace shardformer {

// What a model was built with: the mode and the group the sequence is split over.
struct SequenceParallelism {
  SequenceParallelMode mode = SequenceParallelMode::kSplitGather;
  const distributed::ProcessGroup* group = nullptr;  // null: the sequence is not split
  bool active() const;
};

class SequenceSplit {
 public:
  // A batch of `batch` sequences of `length` tokens; padding: its attention mask [batch, length]
  // of 0/1 (undefined: none). Padding at the end is never seen by a real token of a causal model,
  // so outputs equal those of the unpadded sequence; the padded tokens are masked as keys.
  SequenceSplit(const SequenceParallelism& sp, int64_t batch, int64_t length,
                const at::Tensor& padding);

  SequenceParallelMode mode() const { return mode_; }
  const distributed::ProcessGroup& group() const { return *group_; }
  int64_t length() const { return length_; }
  int64_t padded_length() const { return padded_; }
  int64_t local_length() const;
  // The padded attention mask [batch, padded_length] (padded tokens 0), or undefined.
  const at::Tensor& padding() const { return padding_; }
  // Positions in the padded sequence of group rank `rank`'s tokens [local_length] (int64):
  // contiguous blocks, or for ring attention chunks r and 2 x size - 1 - r of 2 x size.
  at::Tensor token_indices(int rank) const;

  // [batch, length, ...] (the same on every rank) -> this rank's tokens [batch, local, ...];
  // backward all-gathers the gradient.
  at::Tensor scatter(const at::Tensor& x) const;
  // [batch, local, ...] -> [batch, length, ...] in order, padding dropped; backward keeps this
  // rank's part of the gradient.
  at::Tensor gather(const at::Tensor& x) const;
  // This rank's tokens of a tensor every rank holds whole [batch, length or padded, ...],
  // without communication (positions, rotary tables).
  at::Tensor local(const at::Tensor& x) const;
  // x [batch, length, ...] padded with zeros to padded_length along dim 1.
  at::Tensor pad(const at::Tensor& x) const;
  // A replicated parameter applied to this rank's tokens only (a final norm run before the
  // gather): the same tensor forward; backward sums its gradient over the group.
  at::Tensor replicated_parameter(const at::Tensor& parameter) const;

 private:
  bool zigzag() const { return mode_ == SequenceParallelMode::kRingAttn; }
  // Every rank's tokens in rank order [padded]: the order gather() receives them in.
  at::Tensor rank_order() const;

  SequenceParallelMode mode_;
  const distributed::ProcessGroup* group_;
  int64_t length_, padded_;
  at::Tensor padding_;
};

}  // namespace shardformer
