// Megatron's tensor-parallel mappings as LibTorch autograd functions.
#include "shardformer/distributed/comm_ops.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace shardformer::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group lives in the ProcessMesh, which outlives every graph built with it; autograd's
// saved_data holds IValues only, so the pointer is kept as an integer.
void save_group(AutogradContext* ctx, const ProcessGroup& group) {
  ctx->saved_data["group"] = reinterpret_cast<int64_t>(&group);
}
const ProcessGroup& saved_group(AutogradContext* ctx) {
  return *reinterpret_cast<const ProcessGroup*>(ctx->saved_data["group"].toInt());
}

at::Tensor all_reduced(const at::Tensor& tensor, const ProcessGroup& group) {
  at::Tensor result = tensor.clone(at::MemoryFormat::Contiguous);
  group.all_reduce_(result);
  return result;
}

// This rank's part along `dim`, in storage of its own: a view (what contiguous() returns when
// the part is already contiguous, e.g. along the sequence at batch 1) would keep the whole
// tensor alive for as long as the part is kept for backward.
at::Tensor local_slice(const at::Tensor& tensor, const ProcessGroup& group, int64_t dim) {
  const int64_t n = tensor.size(dim) / group.size();
  return tensor.narrow(dim, group.rank() * n, n).clone(at::MemoryFormat::Contiguous);
}

struct CopyToParallelRegion : torch::autograd::Function<CopyToParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const ProcessGroup* group) {
    save_group(ctx, *group);
    return input.view_as(input);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduced(grads[0], saved_group(ctx)), at::Tensor()};
  }
};

struct ReduceFromParallelRegion : torch::autograd::Function<ReduceFromParallelRegion> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& input, const ProcessGroup* group) {
    return all_reduced(input, *group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

// What a collective along one dimension does in one direction.
enum class DimOp : int64_t { kGather, kKeepSlice, kReduceScatter };

at::Tensor apply_dim_op(DimOp op, const at::Tensor& t, const ProcessGroup& group, int64_t dim) {
  switch (op) {
    case DimOp::kGather: return group.all_gather(t, dim);
    case DimOp::kKeepSlice: return local_slice(t, group, dim);
    default: return group.reduce_scatter(t, dim);
  }
}

// Forward `forward_op` along `dim`, backward `backward_op` (the mappings of Megatron's tensor
// and sequence parallelism are pairs of these).
struct DimCollective : torch::autograd::Function<DimCollective> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const ProcessGroup* group, int64_t dim, DimOp forward_op,
                            DimOp backward_op) {
    save_group(ctx, *group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["backward_op"] = static_cast<int64_t>(backward_op);
    return apply_dim_op(forward_op, input, *group, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto op = static_cast<DimOp>(ctx->saved_data["backward_op"].toInt());
    return {apply_dim_op(op, grads[0], saved_group(ctx), ctx->saved_data["dim"].toInt()),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// One all-to-all: blocks along scatter_dim out, received blocks along gather_dim.
at::Tensor exchange(const at::Tensor& input, const ProcessGroup& group, int64_t scatter_dim,
                    int64_t gather_dim) {
  const std::vector<at::Tensor> blocks = input.chunk(group.size(), scatter_dim);
  const at::Tensor received = group.all_to_all(at::stack(blocks));  // [size, ...block]
  return at::cat(received.unbind(0), gather_dim);
}

struct AllToAll : torch::autograd::Function<AllToAll> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const ProcessGroup* group, int64_t scatter_dim, int64_t gather_dim) {
    save_group(ctx, *group);
    ctx->saved_data["scatter"] = scatter_dim;
    ctx->saved_data["gather"] = gather_dim;
    return exchange(input, *group, scatter_dim, gather_dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {exchange(grads[0], saved_group(ctx), ctx->saved_data["gather"].toInt(),
                     ctx->saved_data["scatter"].toInt()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

int64_t wrap_dim(const at::Tensor& tensor, int64_t dim) {
  return dim < 0 ? dim + tensor.dim() : dim;
}

}  // namespace

at::Tensor gather_forward_reduce_scatter_backward(const at::Tensor& input,
                                                  const ProcessGroup& group, int64_t dim) {
  if (group.size() == 1) return input;
  return DimCollective::apply(input, &group, wrap_dim(input, dim), DimOp::kGather,
                              DimOp::kReduceScatter);
}

at::Tensor reduce_scatter_forward_gather_backward(const at::Tensor& input,
                                                  const ProcessGroup& group, int64_t dim) {
  if (group.size() == 1) return input;
  return DimCollective::apply(input, &group, wrap_dim(input, dim), DimOp::kReduceScatter,
                              DimOp::kGather);
}

at::Tensor all_to_all(const at::Tensor& input, const ProcessGroup& group, int64_t scatter_dim,
                      int64_t gather_dim) {
  if (group.size() == 1) return input;
  return AllToAll::apply(input, &group, wrap_dim(input, scatter_dim), wrap_dim(input, gather_dim));
}

at::Tensor copy_to_parallel_region(const at::Tensor& input, const ProcessGroup& group) {
  if (group.size() == 1) return input;
  return CopyToParallelRegion::apply(input, &group);
}

at::Tensor reduce_from_parallel_region(const at::Tensor& input, const ProcessGroup& group) {
  if (group.size() == 1) return input;
  return ReduceFromParallelRegion::apply(input, &group);
}

at::Tensor gather_from_parallel_region(const at::Tensor& input, const ProcessGroup& group,
                                       int64_t dim) {
  if (group.size() == 1) return input;
  return DimCollective::apply(input, &group, wrap_dim(input, dim), DimOp::kGather,
                              DimOp::kKeepSlice);
}

at::Tensor scatter_to_parallel_region(const at::Tensor& input, const ProcessGroup& group,
                                      int64_t dim) {
  if (group.size() == 1) return input;
  return DimCollective::apply(input, &group, wrap_dim(input, dim), DimOp::kKeepSlice,
                              DimOp::kGather);
}

}  // namespace shardformer::distributed
