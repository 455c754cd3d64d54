// Activation checkpointing (the seeds' gradient_checkpoint_config): chosen layers keep only their
// input during forward and run again in backward, trading compute for activation memory.
#pragma once

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <vector>

namespace shardformer::layers {

// Which layers of each pipeline piece recompute: the first n of its layers, where n is
// layers_per_stage[chunk * num_stages + stage] when given (one count per stage, per model chunk
// of an interleaved pipeline), else floor(ratio x the piece's layers). The default recomputes
// nothing.
struct RecomputePolicy {
  double ratio = 0.0;  // in [0, 1]
  std::vector<int64_t> layers_per_stage{};
  bool enabled() const { return ratio > 0.0 || !layers_per_stage.empty(); }
  // Throws ConfigError when a count exceeds its piece's layers or the list has the wrong
  // length. piece_layers: the layers of piece (chunk, stage) for every chunk and stage.
  int64_t layers(int64_t piece_layers, int64_t stage, int64_t num_stages, int64_t chunk,
                 int64_t num_chunks) const;
};

// y = fn(x) without keeping fn's activations when grad mode is on and x requires grad (else an
// ordinary call): backward calls fn again with grad, accumulates the gradients of the
// parameters it used and returns x's (torch.utils.checkpoint's reentrant form). The dropout
// streams under `module` are rewound for the replay, so it drops what forward dropped. fn runs
// again during backward: it must own (capture by value) everything it uses besides x.
at::Tensor recompute_in_backward(torch::nn::Module& module,
                                 std::function<at::Tensor(const at::Tensor&)> fn,
                                 const at::Tensor& x);

// The same for a layer that also reads tensors carrying gradients from outside it (`others`:
// a position bias computed from a parameter, an encoder's output): fn gets them as arguments,
// and backward returns their gradients too.
using RecomputedFn = std::function<at::Tensor(const at::Tensor&, const std::vector<at::Tensor>&)>;
at::Tensor recompute_in_backward(torch::nn::Module& module, RecomputedFn fn, const at::Tensor& x,
                                 const std::vector<at::Tensor>& others);

// A layer step that holds such tensors says which (LayerStack passes them to the recompute).
template <typename Step>
concept HasDifferentiableInputs = requires(const Step& step, const std::vector<at::Tensor>& in) {
  { step.differentiable_inputs() } -> std::same_as<std::vector<at::Tensor>>;
  { step.with_inputs(in) } -> std::same_as<Step>;
};

}  // namespace shardformer::layers
