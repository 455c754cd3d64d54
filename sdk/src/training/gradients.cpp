// Partial-gradient sums over tp, data-parallel bucketed all-reduce and the global norm.
#include "shardformer/training/gradients.h"

#include "shardformer/error.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>

namespace shardformer::training {

void sync_partial_gradients(Model& model, const distributed::ProcessGroup& tp) {
  if (tp.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const auto shard = model.sharding().find(item.key());
    if (shard == model.sharding().end() || !shard->second.partial_gradient()) continue;
    at::Tensor grad = item.value().mutable_grad();
    if (!grad.defined()) continue;
    const TensorShard& s = shard->second;
    if (s.replicas == tp.size()) {  // every rank holds the same piece
      tp.all_reduce_(grad);
      continue;
    }
    // Pieces shared by groups of `replicas` consecutive ranks: sum this group's parts.
    const at::Tensor all = tp.all_gather(grad.unsqueeze(0), 0);  // [tp, ...]
    const int64_t first = (tp.rank() / s.replicas) * s.replicas;
    grad.copy_(all.narrow(0, first, s.replicas).sum(0));
  }
}

void sync_sequence_gradients(Model& model) {
  const SequenceParallelism& sp = model.sequence_parallelism();
  if (!sp.active()) return;
  const bool split_gather = sp.mode == SequenceParallelMode::kSplitGather;
  // The layer stacks' parameters; a final norm run on split tokens sums its own gradients in
  // backward (SequenceSplit::replicated_parameter).
  for (const auto& module : model.named_modules()) {
    if (dynamic_cast<const layers::LayerList*>(module.value().get()) == nullptr) continue;
    for (const auto& param : module.value()->named_parameters()) {
      at::Tensor grad = param.value().mutable_grad();
      if (!grad.defined()) continue;
      // split_gather: split parameters see the whole (gathered) sequence.
      const std::string name = module.key() + "." + param.key();
      if (split_gather && model.sharding().contains(name)) continue;
      sp.group->all_reduce_(grad);
    }
  }
}

void all_reduce_gradients(Model& model, const distributed::ProcessGroup& dp, int64_t bucket_bytes) {
  if (dp.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : model.parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  // Buckets of consecutive gradients of one dtype, flattened, all reduced concurrently.
  std::vector<std::vector<at::Tensor>> buckets;
  int64_t bytes = bucket_bytes;
  for (const at::Tensor& g : grads) {
    if (bytes >= bucket_bytes || buckets.back().front().scalar_type() != g.scalar_type()) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(g);
    bytes += g.numel() * static_cast<int64_t>(g.element_size());
  }
  std::vector<at::Tensor> flats;
  std::vector<distributed::PendingWork> pending;
  for (const auto& bucket : buckets) {
    std::vector<at::Tensor> parts;
    for (const at::Tensor& g : bucket) parts.push_back(g.reshape({-1}));
    flats.push_back(at::cat(parts));
    pending.push_back(dp.all_reduce_async(flats.back()));
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    pending[b].wait();
    int64_t offset = 0;
    for (const at::Tensor& g : buckets[b]) {
      g.copy_(flats[b].narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

GradientNorm::GradientNorm(const Model& model, const distributed::ProcessGroup* tp,
                           const distributed::ProcessGroup* pp)
    : tp_(tp), pp_(pp) {
  const int tp_rank = tp != nullptr ? tp->rank() : 0;
  // Stages holding each shared pattern's parameter (a tied embedding): its square counts 1/k.
  std::map<std::string, double> holders;
  const auto& patterns = model.shared_patterns();
  if (pp != nullptr && pp->size() > 1 && !patterns.empty()) {
    at::Tensor held = at::zeros({static_cast<int64_t>(patterns.size())}, at::kDouble);
    for (size_t i = 0; i < patterns.size(); ++i) {
      held[static_cast<int64_t>(i)] = model.shared_parameters(i).empty() ? 0.0 : 1.0;
    }
    pp->all_reduce_(held);
    for (size_t i = 0; i < patterns.size(); ++i) {
      for (const std::string& name : model.shared_parameters(i)) {
        holders[name] = held[static_cast<int64_t>(i)].item<double>();
      }
    }
  }
  for (const auto& item : model.named_parameters()) {
    const auto shard = model.sharding().find(item.key());
    double weight = 1.0;
    if (shard == model.sharding().end() || shard->second.dim < 0) {
      weight = tp_rank == 0 ? 1.0 : 0.0;  // whole on every tp rank (partial parts: synced)
    } else if (shard->second.replicas > 1) {
      weight = tp_rank % shard->second.replicas == 0 ? 1.0 : 0.0;
    }
    if (const auto h = holders.find(item.key()); h != holders.end() && h->second > 1) {
      weight /= h->second;
    }
    weight_[item.key()] = weight;
  }
}

double GradientNorm::compute(const Model& model) const {
  torch::NoGradGuard no_grad;
  double local = 0;  // sum of this rank's counted squares, as torch's norm of norms
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& g = item.value().grad();
    if (!g.defined()) continue;
    const double norm = at::linalg_vector_norm(g, 2, {}, false, at::kFloat).item<double>();
    local += weight_.at(item.key()) * norm * norm;
  }
  at::Tensor total = at::full({1}, local, at::kDouble);
  if (tp_ != nullptr) tp_->all_reduce_(total);
  if (pp_ != nullptr) pp_->all_reduce_(total);
  return std::sqrt(total.item<double>());
}

}  // namespace shardformer::training
