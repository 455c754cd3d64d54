// Tensor-parallel communication as autograd functions (Megatron's mappings). Each is the
// identity when the group has one rank.
#pragma once

#include "shardformer/distributed/process_group.h"

#include <ATen/Tensor.h>

namespace shardformer::distributed {

// Forward identity; backward all-reduce of the gradient. Enters a column-parallel region.
at::Tensor copy_to_parallel_region(const at::Tensor& input, const ProcessGroup& group);

// Forward all-reduce; backward identity. Leaves a row-parallel region.
at::Tensor reduce_from_parallel_region(const at::Tensor& input, const ProcessGroup& group);

// Forward all-gather along `dim` ([.., n, ..] -> [.., size * n, ..]); backward keeps this
// rank's slice of the gradient.
at::Tensor gather_from_parallel_region(const at::Tensor& input, const ProcessGroup& group,
                                       int64_t dim = -1);

// Forward keeps this rank's slice along `dim` ([.., size * n, ..] -> [.., n, ..]); backward
// all-gathers the gradient.
at::Tensor scatter_to_parallel_region(const at::Tensor& input, const ProcessGroup& group,
                                      int64_t dim = -1);

// Sequence parallelism (Megatron SP): forward all-gather along `dim` of the sequence-split
// input of a column-parallel layer; backward reduce-scatters the gradient along `dim`.
at::Tensor gather_forward_reduce_scatter_backward(const at::Tensor& input,
                                                  const ProcessGroup& group, int64_t dim);

// Forward reduce-scatter along `dim` of a row-parallel layer's partial output (the sum, this
// rank's part of the sequence); backward all-gathers the gradient along `dim`.
at::Tensor reduce_scatter_forward_gather_backward(const at::Tensor& input,
                                                  const ProcessGroup& group, int64_t dim);

// All-to-all (DeepSpeed-Ulysses): `input` split into size blocks along scatter_dim, block i
// sent to rank i, the blocks received concatenated along gather_dim in rank order. Backward is
// the all-to-all back.
at::Tensor all_to_all(const at::Tensor& input, const ProcessGroup& group, int64_t scatter_dim,
                      int64_t gather_dim);

}  // namespace shardformer::distributed
