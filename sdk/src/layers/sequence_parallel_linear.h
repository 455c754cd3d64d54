// Internal: the column-parallel GEMM of split_gather sequence parallelism as one autograd
// function that keeps only this rank's part of the input (Megatron's sequence-parallel linear).
#pragma once

#include "shardformer/distributed/process_group.h"

#include <ATen/Tensor.h>

namespace shardformer::layers {

// y = all_gather_seq(x) W for x [batch, seq/tp, in], W [in, out] (conv1d = true) or [out, in];
// returns [batch, seq, out] (the bias is the caller's). Only x is kept for backward, which
// gathers it again: the whole sequence's input is never held between the passes. With
// overlap, this rank's block is multiplied while the others are gathered, the backward
// re-gather runs during the input-gradient GEMM and the input gradient's reduce-scatter during
// the weight-gradient GEMM.
at::Tensor sequence_parallel_matmul(const at::Tensor& x, const at::Tensor& weight, bool conv1d,
                                    bool overlap, const distributed::ProcessGroup& group);

}  // namespace shardformer::layers
