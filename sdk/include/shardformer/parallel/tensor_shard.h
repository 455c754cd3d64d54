// How one parameter is split across tensor-parallel ranks, reading only the local slice from
// a checkpoint, and gathering the local pieces back into the HF tensor (for gradients and
// saving): fused blocks reassembled, vocabulary padding removed.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardformer {

class Checkpoint;
namespace distributed {
class ProcessGroup;
}

struct TensorShard {
  std::vector<int64_t> full_shape{};  // the HF tensor's shape
  int64_t dim = -1;                   // split dimension; -1: replicated
  int64_t fused_blocks = 1;           // dim holds this many equal blocks, each split across ranks
  int64_t padded_size = 0;            // dim padded to this size before splitting (vocab); 0: none
  // Consecutive ranks holding the same piece: size / replicas pieces. Each of them computes
  // part of the piece's gradient, and the parts sum to it (GQA's KV heads when there are
  // fewer than tp ranks; with dim = -1 and replicas = size, a replicated parameter applied to
  // split activations, such as Qwen3's per-head q_norm).
  int64_t replicas = 1;
  // An uneven split: the rows of dim each piece holds, in rank order (their sum is the
  // dimension's size; attention heads that do not divide by tp). Empty: equal pieces.
  std::vector<int64_t> sizes{};
  int rank = 0, size = 1;

  bool replicated() const { return dim < 0 || size == replicas; }
  // Whether ranks hold partial gradients of this parameter that must be summed.
  bool partial_gradient() const { return replicas > 1; }
  std::vector<int64_t> local_shape() const;
  // Which rows [begin, end) of dim (within one block) this rank holds, clipped to the real
  // size; padding rows beyond it are zeros in the local tensor.
  std::pair<int64_t, int64_t> local_range() const;
};

// Parameter name (as in named_parameters() of the root model) -> its shard.
using ShardingPlan = std::map<std::string, TensorShard>;

// Reads the local piece of checkpoint tensor `name` (only those bytes). Throws ModelError
// naming the tensor when its dimension does not divide by the shard count.
at::Tensor load_shard(const Checkpoint& checkpoint, const std::string& name,
                      const TensorShard& shard);

// The full HF tensor from every rank's local piece (collective over `group`). With
// gradient = true `local` is a gradient: the replicas' parts are summed.
at::Tensor gather_shard(const at::Tensor& local, const TensorShard& shard,
                        const distributed::ProcessGroup& group, bool gradient = false);

// Size of a vocabulary of `vocab` rows padded to a multiple of `divisible_by` x tp_size.
int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int64_t tp_size);

}  // namespace shardformer
