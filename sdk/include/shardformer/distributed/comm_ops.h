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

}  // namespace shardformer::distributed
