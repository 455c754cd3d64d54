// Activation checkpointing: an autograd function that runs a layer without recording its graph
// and replays it, dropout masks included, when its gradient is needed.
#include "shardformer/layers/recompute.h"

#include "shardformer/error.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/strings.h"

#include <ATen/core/ivalue.h>
#include <torch/autograd.h>

#include <cmath>
#include <map>
#include <string>

namespace shardformer::layers {

int64_t RecomputePolicy::layers(int64_t piece_layers, int64_t stage, int64_t num_stages,
                                int64_t chunk, int64_t num_chunks) const {
  if (layers_per_stage.empty()) {
    return static_cast<int64_t>(std::floor(ratio * static_cast<double>(piece_layers) + 1e-9));
  }
  const int64_t pieces = num_stages * num_chunks;
  if (static_cast<int64_t>(layers_per_stage.size()) != pieces) {
    throw ConfigError(str("num_ckpt_layers_per_stage holds ", layers_per_stage.size(),
                          " counts for a pipeline of ", pieces, " pieces (stages x chunks)"));
  }
  const int64_t n = layers_per_stage[static_cast<size_t>(chunk * num_stages + stage)];
  if (n < 0 || n > piece_layers) {
    throw ConfigError(str("num_ckpt_layers_per_stage[", chunk * num_stages + stage, "] = ", n,
                          ": that piece holds ", piece_layers, " layers"));
  }
  return n;
}

namespace {

// What backward needs to run a layer again.
struct Replay : torch::CustomClassHolder {
  torch::nn::Module* module = nullptr;
  std::function<at::Tensor(const at::Tensor&)> fn;
  std::map<std::string, at::Tensor> dropout_states;  // as forward found them
};

class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<Replay>& replay) {
    ctx->save_for_backward({x});
    ctx->saved_data["replay"] = c10::IValue::make_capsule(replay);
    return replay->fn(x);  // grad mode is off inside a Function's forward: nothing is kept
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto replay =
        c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data.at("replay").toCapsule());
    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor y;
    {
      const auto now = dropout_rng_states(*replay->module);
      set_dropout_rng_states(*replay->module, replay->dropout_states);
      const at::AutoGradMode grad_mode(true);
      y = replay->fn(x);
      set_dropout_rng_states(*replay->module, now);
    }
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor recompute_in_backward(torch::nn::Module& module,
                                 std::function<at::Tensor(const at::Tensor&)> fn,
                                 const at::Tensor& x) {
  if (!at::GradMode::is_enabled() || !x.requires_grad()) return fn(x);
  auto replay = c10::make_intrusive<Replay>();
  replay->module = &module;
  replay->fn = std::move(fn);
  replay->dropout_states = dropout_rng_states(module);
  return RecomputeFunction::apply(x, replay);
}

}  // namespace shardformer::layers
