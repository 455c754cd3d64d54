// Local-slice loading and gathering of tensor-parallel parameters.
#include "shardformer/parallel/tensor_shard.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer {
namespace {

// Size of one block of the split dimension (after padding).
int64_t block_size(const TensorShard& s) {
  const int64_t total = s.padded_size > 0 ? s.padded_size : s.full_shape[s.dim];
  return total / s.fused_blocks;
}

int64_t pieces(const TensorShard& s) { return s.size / s.replicas; }

void check_divisible(const TensorShard& s, const std::string& name) {
  const int64_t total = s.padded_size > 0 ? s.padded_size : s.full_shape[s.dim];
  if (!s.sizes.empty()) {
    int64_t sum = 0;
    for (int64_t n : s.sizes) sum += n;
    if (static_cast<int64_t>(s.sizes.size()) != pieces(s) || sum != total || s.fused_blocks != 1 ||
        s.padded_size > 0 || s.replicas != 1) {
      throw ModelError(str("tensor '", name, "': an uneven split of dimension ", s.dim, " (size ",
                           total, ") into [", join(s.sizes, ", "),
                           "] does not fit tensor-parallel size ", s.size));
    }
    return;
  }
  if (s.size % s.replicas != 0 || total % (s.fused_blocks * pieces(s)) != 0) {
    throw ModelError(str("tensor '", name, "': dimension ", s.dim, " of size ", total,
                         (s.fused_blocks > 1 ? str(" (", s.fused_blocks, " fused blocks)") : ""),
                         " does not divide into ", pieces(s), " pieces for tensor-parallel size ",
                         s.size));
  }
}

}  // namespace

std::vector<int64_t> TensorShard::local_shape() const {
  std::vector<int64_t> shape = full_shape;
  if (!replicated() && !sizes.empty()) {
    shape[dim] = sizes[rank / replicas];
  } else if (!replicated()) {
    shape[dim] = fused_blocks * (block_size(*this) / pieces(*this));
  }
  return shape;
}

std::pair<int64_t, int64_t> TensorShard::local_range() const {
  if (!sizes.empty()) {
    int64_t begin = 0;
    for (int64_t piece = 0; piece < rank / replicas; ++piece) begin += sizes[piece];
    return {begin, begin + sizes[rank / replicas]};
  }
  const int64_t per_rank = block_size(*this) / pieces(*this);
  const int64_t begin = (rank / replicas) * per_rank;
  const int64_t real = full_shape[dim] / fused_blocks;
  return {std::min(begin, real), std::min(begin + per_rank, real)};
}

at::Tensor load_shard(const Checkpoint& checkpoint, const std::string& name,
                      const TensorShard& shard) {
  if (shard.replicated()) return checkpoint.read(name);
  check_divisible(shard, name);
  const TensorInfo& info = checkpoint.info(name);
  const int64_t real_block = shard.full_shape[shard.dim] / shard.fused_blocks;
  const auto [begin, end] = shard.local_range();
  const auto options = at::TensorOptions().dtype(info.dtype);
  // A block of whole rows with no padding is the file's bytes: used in place, as a whole
  // replicated tensor is (no copy; the page cache's 2 MiB pages where it has them).
  if (shard.dim == 0 && shard.fused_blocks == 1 && shard.local_shape()[0] == end - begin) {
    return checkpoint.read_rows(name, begin, end - begin);
  }
  // Vocabulary padding rows stay zero; every real row is read straight into place.
  at::Tensor local = shard.padded_size > 0 ? at::zeros(shard.local_shape(), options)
                                           : at::empty(shard.local_shape(), options);
  const int64_t local_block = local.size(shard.dim) / shard.fused_blocks;
  for (int64_t block = 0; block < shard.fused_blocks; ++block) {
    const at::Tensor target = local.narrow(shard.dim, block * local_block, end - begin);
    const int64_t start = block * real_block + begin;
    if (target.is_contiguous()) {
      checkpoint.read_slice_into(name, shard.dim, start, end - begin, target);
    } else {  // a block of a split inner dimension: strided in the local tensor
      target.copy_(checkpoint.read_slice(name, shard.dim, start, end - begin));
    }
  }
  return local;
}

at::Tensor gather_shard(const at::Tensor& local, const TensorShard& shard,
                        const distributed::ProcessGroup& group, bool gradient) {
  if (shard.dim < 0 || shard.size == 1) {  // whole on every rank
    if (!gradient || !shard.partial_gradient()) return local;
    at::Tensor sum = local.clone();
    group.all_reduce_(sum);
    return sum;
  }
  if (!shard.sizes.empty()) {
    // Pieces of different sizes: each padded to the largest for the gather, then trimmed.
    const int64_t largest = *std::max_element(shard.sizes.begin(), shard.sizes.end());
    at::Tensor padded = local;
    if (local.size(shard.dim) < largest) {
      std::vector<int64_t> pad_shape = local.sizes().vec();
      pad_shape[shard.dim] = largest - local.size(shard.dim);
      padded = at::cat({local, at::zeros(pad_shape, local.options())}, shard.dim);
    }
    const at::Tensor all = group.all_gather(padded.contiguous(), shard.dim);
    std::vector<at::Tensor> pieces_in_order;
    for (size_t r = 0; r < shard.sizes.size(); ++r) {
      pieces_in_order.push_back(
          all.narrow(shard.dim, static_cast<int64_t>(r) * largest, shard.sizes[r]));
    }
    return at::cat(pieces_in_order, shard.dim);
  }
  at::Tensor full = group.all_gather(local.contiguous(), shard.dim);  // rank-major pieces
  if (shard.replicas > 1) {
    // [.., pieces * replicas * n, ..]: a gradient sums its replicas' parts, a value takes one.
    std::vector<int64_t> split = full.sizes().vec();
    split[shard.dim] = local.size(shard.dim);
    split.insert(split.begin() + shard.dim, shard.replicas);
    split.insert(split.begin() + shard.dim, pieces(shard));
    full = full.reshape(split);
    full = gradient ? full.sum(shard.dim + 1) : full.select(shard.dim + 1, 0);
    std::vector<int64_t> merged = local.sizes().vec();
    merged[shard.dim] *= pieces(shard);
    full = full.reshape(merged);
  }
  if (shard.fused_blocks > 1) {
    // [.., pieces * blocks * piece, ..] -> [.., blocks * pieces * piece, ..]
    std::vector<int64_t> split = full.sizes().vec();
    const int64_t piece = local.size(shard.dim) / shard.fused_blocks;
    split[shard.dim] = piece;
    split.insert(split.begin() + shard.dim, shard.fused_blocks);
    split.insert(split.begin() + shard.dim, pieces(shard));
    full = full.reshape(split).transpose(shard.dim, shard.dim + 1).reshape(shard.full_shape);
  }
  return full.narrow(shard.dim, 0, shard.full_shape[shard.dim]).contiguous();
}

int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int64_t tp_size) {
  const int64_t multiple = std::max<int64_t>(divisible_by, 1) * tp_size;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace shardformer
