// Padding, token assignment (contiguous or zig-zag) and the split / gather of hidden states.
#include "shardformer/parallel/sequence_split.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/distributed/process_group.h"

#include <ATen/ATen.h>

namespace shardformer {

bool SequenceParallelism::active() const { return group != nullptr && group->size() > 1; }

SequenceSplit::SequenceSplit(const SequenceParallelism& sp, int64_t batch, int64_t length,
                             const at::Tensor& padding)
    : mode_(sp.mode), group_(sp.group), length_(length) {
  const int64_t chunks = group_->size() * (zigzag() ? 2 : 1);
  padded_ = (length + chunks - 1) / chunks * chunks;
  if (padded_ > length || padding.defined()) {
    at::Tensor mask = padding.defined()
                          ? padding.to(at::kLong)
                          : at::ones({batch, length}, at::TensorOptions().dtype(at::kLong));
    padding_ = pad(mask);
  }
}

int64_t SequenceSplit::local_length() const { return padded_ / group_->size(); }

at::Tensor SequenceSplit::token_indices(int rank) const {
  const auto options = at::TensorOptions().dtype(at::kLong);
  if (!zigzag()) return at::arange(rank * local_length(), (rank + 1) * local_length(), options);
  const int64_t chunk = local_length() / 2, last = 2 * group_->size() - 1 - rank;
  return at::cat({at::arange(rank * chunk, (rank + 1) * chunk, options),
                  at::arange(last * chunk, (last + 1) * chunk, options)});
}

at::Tensor SequenceSplit::rank_order() const {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < group_->size(); ++r) parts.push_back(token_indices(r));
  return at::cat(parts);
}

at::Tensor SequenceSplit::pad(const at::Tensor& x) const {
  if (x.size(1) == padded_) return x;
  auto shape = x.sizes().vec();
  shape[1] = padded_ - x.size(1);
  return at::cat({x, at::zeros(shape, x.options())}, 1);
}

at::Tensor SequenceSplit::scatter(const at::Tensor& x) const {
  at::Tensor ordered = pad(x);  // [batch, padded, ...]
  if (zigzag()) ordered = ordered.index_select(1, rank_order().to(x.device()));
  return distributed::scatter_to_parallel_region(ordered, *group_, 1);  // [batch, local, ...]
}

at::Tensor SequenceSplit::gather(const at::Tensor& x) const {
  at::Tensor full = distributed::gather_from_parallel_region(x, *group_, 1);  // [batch, padded, ..]
  if (zigzag()) full = full.index_select(1, at::argsort(rank_order()).to(x.device()));
  return full.narrow(1, 0, length_);
}

at::Tensor SequenceSplit::replicated_parameter(const at::Tensor& parameter) const {
  return distributed::copy_to_parallel_region(parameter, *group_);
}

at::Tensor SequenceSplit::local(const at::Tensor& x) const {
  return pad(x).index_select(1, token_indices(group_->rank()).to(x.device()));
}

}  // namespace shardformer
