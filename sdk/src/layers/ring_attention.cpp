// Ring attention: blockwise causal attention with online-softmax merging, keys and values passed
// round the sequence group with point-to-point messages, and its backward pass.
#include "shardformer/layers/ring_attention.h"

#include "shardformer/distributed/process_group.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <limits>
#include <vector>

namespace shardformer::layers {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// What every block of one call shares.
struct Ring {
  const distributed::ProcessGroup* group;
  at::Tensor positions;  // [size, local]: every rank's token positions
  at::Tensor padding;    // [batch, padded] 0/1, or empty: no padding
  double scale;
  int64_t groups;  // query heads per key / value head

  int rank() const { return group->rank(); }
  int size() const { return group->size(); }
  int next() const { return (rank() + 1) % size(); }
  int prev() const { return (rank() + size() - 1) % size(); }
  int source(int step) const { return (rank() - step + size()) % size(); }

  // [batch or 1, 1, local, local]: which keys of rank `src`'s block this rank's queries see.
  at::Tensor mask(int src, c10::Device device) const {
    const at::Tensor q_pos = positions[rank()].to(device);
    const at::Tensor k_pos = positions[src].to(device);
    at::Tensor seen = k_pos.view({1, -1}) <= q_pos.view({-1, 1});  // [local, local]
    seen = seen.view({1, 1, seen.size(0), seen.size(1)});
    if (padding.numel() > 0) {
      const at::Tensor real = padding.to(device).index_select(1, k_pos).to(at::kBool);
      seen = seen & real.view({real.size(0), 1, 1, real.size(1)});
    }
    return seen;
  }

  at::Tensor expand(const at::Tensor& kv) const {  // [b, kv_heads, L, d] -> [b, heads, L, d]
    return groups == 1 ? kv : kv.repeat_interleave(groups, 1);
  }
  at::Tensor reduce(const at::Tensor& grad) const {  // [b, heads, L, d] -> [b, kv_heads, L, d]
    if (groups == 1) return grad;
    return grad.view({grad.size(0), grad.size(1) / groups, groups, grad.size(2), grad.size(3)})
        .sum(2);
  }

  // Scores of one block, masked: [batch, heads, local, local].
  at::Tensor scores(const at::Tensor& q, const at::Tensor& k, int src) const {
    const at::Tensor s = at::matmul(q, expand(k).transpose(-2, -1)) * scale;
    return s.masked_fill(mask(src, q.device()).logical_not(), kNegInf);
  }

  // Sends `tensors` to the next rank and receives the previous rank's into fresh tensors.
  std::vector<at::Tensor> rotate(const std::vector<at::Tensor>& tensors) const {
    std::vector<distributed::PendingWork> sends;
    for (size_t i = 0; i < tensors.size(); ++i) {
      sends.push_back(group->isend(tensors[i], next(), static_cast<int>(i)));
    }
    std::vector<at::Tensor> received;
    for (size_t i = 0; i < tensors.size(); ++i) {
      at::Tensor t = at::empty_like(tensors[i], at::MemoryFormat::Contiguous);
      group->recv_(t, prev(), static_cast<int>(i));
      received.push_back(t);
    }
    for (auto& send : sends) send.wait();
    return received;
  }
};

// exp(a - b) where b may be -inf (a row that saw no key so far): 0 there.
at::Tensor weight(const at::Tensor& a, const at::Tensor& b) {
  return at::where(at::isinf(b), at::zeros_like(a), (a - b).exp());
}

c10::ScalarType accumulator_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble || t.scalar_type() == at::kFloat ? at::kDouble : at::kFloat;
}

// x / l where l may be 0 (a row that saw no key): 0 there.
at::Tensor safe_divide(const at::Tensor& x, const at::Tensor& l) {
  return at::where(l == 0, at::zeros_like(x), x / l);
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  // Flash attention's accumulation: a running maximum m of each query's scores, the sum l of
  // exp(score - m) and the sum of exp(score - m) v, rescaled when m grows; out = acc / l. The
  // probabilities are normalised once, at the end, as a plain softmax does.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, const at::Tensor& positions,
                            const at::Tensor& padding, const distributed::ProcessGroup* group) {
    const Ring ring{group, positions, padding, scale, q.size(1) / k.size(1)};
    // The forward pass computes in a wider type (fp64 for fp32 inputs, fp32 for half types):
    // in fp32 the blocks' rounding alone put gradients 1.6e-6 from HF's (whose SDPA kernel
    // rounds differently); wide, they are within 1e-6. Backward's rounding did not matter.
    const c10::ScalarType wide = accumulator_type(q);
    const at::Tensor qw = q.to(wide);
    at::Tensor acc = at::zeros(q.sizes(), q.options().dtype(wide));  // [b, h, L, d]
    at::Tensor m = at::full({q.size(0), q.size(1), q.size(2), 1}, kNegInf, acc.options());
    at::Tensor l = at::zeros_like(m);  // [b, h, L, 1]
    std::vector<at::Tensor> kv{k.contiguous(), v.contiguous()};
    for (int step = 0; step < ring.size(); ++step) {
      const at::Tensor s = ring.scores(qw, kv[0].to(wide), ring.source(step));  // [b, h, L, L]
      const at::Tensor m_new = at::maximum(m, s.amax(-1, /*keepdim=*/true));
      const at::Tensor rescale = weight(m, m_new);
      const at::Tensor p = weight(s, m_new);
      l = l * rescale + p.sum(-1, /*keepdim=*/true);
      acc = acc * rescale + at::matmul(p, ring.expand(kv[1].to(wide)));
      m = m_new;
      if (step + 1 < ring.size()) kv = ring.rotate(kv);
    }
    const at::Tensor out = safe_divide(acc, l).to(q.scalar_type());  // [b, h, L, d]
    ctx->save_for_backward({q, k, v, out, m.to(q.scalar_type()), l.to(q.scalar_type())});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["positions"] = positions;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &out = saved[3], &m = saved[4], &l = saved[5];
    const Ring ring{
        reinterpret_cast<const distributed::ProcessGroup*>(ctx->saved_data["group"].toInt()),
        ctx->saved_data["positions"].toTensor(), ctx->saved_data["padding"].toTensor(),
        ctx->saved_data["scale"].toDouble(), q.size(1) / saved[1].size(1)};
    const at::Tensor dout = grads[0];
    const at::Tensor delta = (dout * out).sum(-1, /*keepdim=*/true);  // sum_j p_ij dp_ij
    at::Tensor dq = at::zeros_like(q);
    // Keys, values and the gradients accumulated for them travel together; after size steps
    // the gradients are back with the rank that owns the block.
    std::vector<at::Tensor> kv{saved[1].contiguous(), saved[2].contiguous(),
                               at::zeros_like(saved[1], at::MemoryFormat::Contiguous),
                               at::zeros_like(saved[2], at::MemoryFormat::Contiguous)};
    for (int step = 0; step < ring.size(); ++step) {
      const at::Tensor s = ring.scores(q, kv[0], ring.source(step));
      const at::Tensor p = safe_divide(weight(s, m), l);  // the probabilities [b, h, L, L]
      const at::Tensor dp = at::matmul(dout, ring.expand(kv[1]).transpose(-2, -1));
      const at::Tensor ds = p * (dp - delta) * ring.scale;
      dq.add_(at::matmul(ds, ring.expand(kv[0])));
      kv[2] = kv[2] + ring.reduce(at::matmul(ds.transpose(-2, -1), q));
      kv[3] = kv[3] + ring.reduce(at::matmul(p.transpose(-2, -1), dout));
      if (step + 1 < ring.size()) {
        kv = ring.rotate(kv);
      } else {
        kv = ring.rotate({kv[2], kv[3]});  // home: the gradients of this rank's keys, values
      }
    }
    return {dq, kv[0], kv[1], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          double scale, const SequenceSplit& split) {
  std::vector<at::Tensor> positions;
  for (int r = 0; r < split.group().size(); ++r) positions.push_back(split.token_indices(r));
  // autograd functions take defined tensors only: no padding is an empty one.
  const at::Tensor padding =
      split.padding().defined() ? split.padding() : at::empty({0}, at::kLong);
  return RingAttention::apply(q, k, v, scale, at::stack(positions), padding, &split.group());
}

}  // namespace shardformer::layers
