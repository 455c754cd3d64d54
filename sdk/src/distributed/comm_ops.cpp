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

at::Tensor local_slice(const at::Tensor& tensor, const ProcessGroup& group, int64_t dim) {
  const int64_t n = tensor.size(dim) / group.size();
  return tensor.narrow(dim, group.rank() * n, n).contiguous();
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

struct GatherFromParallelRegion : torch::autograd::Function<GatherFromParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const ProcessGroup* group, int64_t dim) {
    save_group(ctx, *group);
    ctx->saved_data["dim"] = dim;
    return group->all_gather(input, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {local_slice(grads[0], saved_group(ctx), ctx->saved_data["dim"].toInt()), at::Tensor(),
            at::Tensor()};
  }
};

struct ScatterToParallelRegion : torch::autograd::Function<ScatterToParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const ProcessGroup* group, int64_t dim) {
    save_group(ctx, *group);
    ctx->saved_data["dim"] = dim;
    return local_slice(input, *group, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {saved_group(ctx).all_gather(grads[0], ctx->saved_data["dim"].toInt()), at::Tensor(),
            at::Tensor()};
  }
};

int64_t wrap_dim(const at::Tensor& tensor, int64_t dim) {
  return dim < 0 ? dim + tensor.dim() : dim;
}

}  // namespace

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
  return GatherFromParallelRegion::apply(input, &group, wrap_dim(input, dim));
}

at::Tensor scatter_to_parallel_region(const at::Tensor& input, const ProcessGroup& group,
                                      int64_t dim) {
  if (group.size() == 1) return input;
  return ScatterToParallelRegion::apply(input, &group, wrap_dim(input, dim));
}

}  // namespace shardformer::distributed
