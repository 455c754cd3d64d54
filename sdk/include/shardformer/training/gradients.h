// Gradients across the mesh before an optimizer step: the parts that ranks sharing a parameter
// hold summed (KV heads fewer than tp, per-head norms), the data-parallel replicas' gradients
// summed in buckets, and the global gradient norm (the trainer clips with it), computed once
// across tp, pp and dp with every replicated or tied parameter counted once.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/model.h"

#include <cstdint>

namespace shardformer::training {

// Sums the gradients of parameters whose TensorShard has replicas > 1 over the ranks that
// hold the same piece (collective over tp). Afterwards they hold the whole gradient.
void sync_partial_gradients(Model& model, const distributed::ProcessGroup& tp);

// Sequence parallelism: sums the gradients of parameters applied to this rank's part of the
// sequence over the sequence group — every layer parameter over sp (all_to_all, ring_attn), the
// layers' replicated parameters over tp (split_gather). Nothing without sequence parallelism.
void sync_sequence_gradients(Model& model);
// Sums every gradient over the data-parallel group, flattened into buckets of about
// bucket_bytes, all of them in flight at once. Collective over dp.
void all_reduce_gradients(Model& model, const distributed::ProcessGroup& dp,
                          int64_t bucket_bytes = 25 << 20);

// What counts each parameter once in a norm: on tp, a replicated parameter on tp rank 0 only
// and a shared piece on the first of its replicas; on pp, a parameter several stages hold (a
// tied embedding) divided over its holders (found with one all-reduce when built).
class GradientNorm {
 public:
  // tp / pp: null for no such axis.
  GradientNorm(const Model& model, const distributed::ProcessGroup* tp,
               const distributed::ProcessGroup* pp);
  // The L2 norm of the whole model's gradient, the same on every rank (collective over tp and
  // pp; data-parallel replicas hold equal gradients and are not summed).
  double compute(const Model& model) const;

 private:
  const distributed::ProcessGroup *tp_, *pp_;
  std::map<std::string, double> weight_;  // parameter name -> its share of the sum of squares
};

}  // namespace shardformer::training
