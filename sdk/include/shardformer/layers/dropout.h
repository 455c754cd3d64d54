// Dropout for tensor-parallel models whose masks do not depend on the layout: a replicated
// activation drops the same elements on every tensor-parallel rank (one stream per module), and
// an activation split into slices (attention heads) draws each slice from a stream of its own,
// so a slice is dropped alike whichever rank holds it: tp = 2 drops what tp = 1 drops. Streams
// mix ShardConfig::seed, the module path and the data-parallel rank, and can be saved.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/parallel/sequence_split.h"

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardformer::layers {

// An activation split along `dim` into `total` equal slices, of which this rank holds
// [first, first + count) (e.g. dim 1 of [batch, heads, q, k], heads split over tp).
struct DropoutSlices {
  int64_t dim = 1;
  int64_t total = 1;
  int64_t first = 0;
  int64_t count = 1;
};

class Dropout : public torch::nn::Module {
 public:
  // Dropout of a replicated activation with probability p (ModelError unless 0 <= p < 1).
  Dropout(const BuildContext& ctx, double p);
  // Dropout of a split activation: one stream per slice this rank holds.
  Dropout(const BuildContext& ctx, double p, DropoutSlices slices);

  // Identity in eval mode or when p == 0; otherwise zeroes elements with probability p and
  // scales the rest by 1 / (1 - p). A split activation may hold part of this rank's slices:
  // those from first_slice on (Ulysses attention holds a part of its heads).
  at::Tensor forward(const at::Tensor& input, int64_t first_slice = 0);
  // Dropout of this rank's tokens of a sequence-split activation [batch, local, ...]: the mask
  // of the whole sequence is drawn (so that it does not depend on the split) and this rank's
  // part kept.
  at::Tensor forward(const at::Tensor& input, const SequenceSplit* sequence);
  // Whether forward() drops anything now (training mode and p > 0).
  bool active() const { return is_training() && p_ > 0.0; }
  double p() const { return p_; }

  // The streams' states [streams, state_bytes] uint8, to save with a training checkpoint.
  at::Tensor rng_state() const;
  // Restores states from rng_state(); throws Error naming the module for another shape.
  void set_rng_state(const at::Tensor& state);

 protected:
  at::Generator& replicated_stream() {
    return streams_.front();
  }  // the one stream of a replicated activation

 private:
  std::string path_;
  double p_;
  std::optional<DropoutSlices> slices_;
  std::vector<at::Generator> streams_;  // one, or one per local slice
};

// Every Dropout's stream state under `root`, by module path (named_modules), and the reverse.
// set_dropout_rng_states throws Error naming a module whose state is missing.
std::map<std::string, at::Tensor> dropout_rng_states(const torch::nn::Module& root);
void set_dropout_rng_states(torch::nn::Module& root,
                            const std::map<std::string, at::Tensor>& states);

}  // namespace shardformer::layers
