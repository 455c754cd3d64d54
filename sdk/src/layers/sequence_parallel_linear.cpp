// Sequence-parallel column GEMM: all-gather of the input (forward, again in backward) and
// reduce-scatter of its gradient, optionally overlapped with the GEMMs.
#include "sequence_parallel_linear.h"

#include "library_gemm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace shardformer::layers {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [rows, in] x W -> [rows, out], for either weight layout.
at::Tensor times_weight(const at::Tensor& x, const at::Tensor& weight, bool conv1d) {
  return conv1d ? library_mm(x, weight) : library_mm(x, weight.t());
}

// Starts gathering every rank's `mine` [seq/tp, batch, in] into `gathered` [seq, batch, in].
distributed::PendingWork start_gather(const at::Tensor& mine, at::Tensor& gathered,
                                      const distributed::ProcessGroup& group) {
  gathered = at::empty({group.size() * mine.size(0), mine.size(1), mine.size(2)}, mine.options());
  return group.all_gather_into_async(mine, gathered);
}

struct SequenceParallelMatmul : torch::autograd::Function<SequenceParallelMatmul> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            bool conv1d, bool overlap, const distributed::ProcessGroup* group) {
    const int64_t batch = x.size(0), local = x.size(1), in = x.size(2);
    const int64_t out = conv1d ? weight.size(1) : weight.size(0);
    // Sequence-major so that each rank's block is contiguous: [seq/tp, batch, in].
    const at::Tensor mine = x.transpose(0, 1).contiguous();
    at::Tensor gathered;  // [seq, batch, in]
    distributed::PendingWork gather = start_gather(mine, gathered, *group);
    at::Tensor y = at::empty({group->size() * local, batch, out}, x.options());  // [seq, b, out]
    const auto block = [&](const at::Tensor& rows, int64_t rank) {
      y.narrow(0, rank * local, local)
          .copy_(times_weight(rows.reshape({-1, in}), weight, conv1d).view({local, batch, out}));
    };
    if (overlap) block(mine, group->rank());
    gather.wait();
    if (overlap) {
      for (int64_t r = 0; r < group->size(); ++r) {
        if (r != group->rank()) block(gathered.narrow(0, r * local, local), r);
      }
    } else {
      y = times_weight(gathered.view({-1, in}), weight, conv1d).view({-1, batch, out});
    }
    ctx->save_for_backward({mine, weight});
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    ctx->saved_data["conv1d"] = conv1d;
    ctx->saved_data["overlap"] = overlap;
    return y.transpose(0, 1).contiguous();  // [batch, seq, out]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& mine = saved[0];  // [seq/tp, batch, in]
    const at::Tensor& weight = saved[1];
    const auto* group =
        reinterpret_cast<const distributed::ProcessGroup*>(ctx->saved_data["group"].toInt());
    const bool conv1d = ctx->saved_data["conv1d"].toBool();
    const bool overlap = ctx->saved_data["overlap"].toBool();
    const int64_t batch = mine.size(1), in = mine.size(2), seq = mine.size(0) * group->size();
    at::Tensor gathered;  // the input again [seq, batch, in]
    distributed::PendingWork gather = start_gather(mine, gathered, *group);
    if (!overlap) gather.wait();
    const at::Tensor dy = grads[0].transpose(0, 1).reshape({seq * batch, -1});  // [seq*b, out]
    const at::Tensor dx_full = (conv1d ? library_mm(dy, weight.t()) : library_mm(dy, weight))
                                   .view({seq, batch, in});  // [seq, batch, in], partial sums
    at::Tensor dx = at::empty_like(mine);
    distributed::PendingWork scatter = group->reduce_scatter_async(dx_full, dx);
    if (!overlap) scatter.wait();
    gather.wait();
    const at::Tensor x2 = gathered.view({seq * batch, in});
    const at::Tensor dw = conv1d ? library_mm(x2.t(), dy) : library_mm(dy.t(), x2);
    scatter.wait();
    return {dx.transpose(0, 1), dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor sequence_parallel_matmul(const at::Tensor& x, const at::Tensor& weight, bool conv1d,
                                    bool overlap, const distributed::ProcessGroup& group) {
  return SequenceParallelMatmul::apply(x, weight, conv1d, overlap, &group);
}

}  // namespace shardformer::layers
