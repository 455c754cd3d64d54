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
  RecomputedFn fn;
  std::map<std::string, at::Tensor> dropout_states;  // as forward found them
};

class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  // x and `others` are the Function's inputs (a gradient each); the replay is not.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            at::TensorList others, const c10::intrusive_ptr<Replay>& replay) {
    std::vector<at::Tensor> saved{x};
    saved.insert(saved.end(), others.begin(), others.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["replay"] = c10::IValue::make_capsule(replay);
    return replay->fn(x, others.vec());  // grad mode is off in a Function's forward: nothing kept
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto replay =
        c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data.at("replay").toCapsule());
    std::vector<at::Tensor> inputs;  // leaves: x, then the others
    for (const at::Tensor& saved : ctx->get_saved_variables()) {
      inputs.push_back(saved.detach().requires_grad_(true));
    }
    const std::vector<at::Tensor> others(inputs.begin() + 1, inputs.end());
    at::Tensor y;
    {
      const auto now = dropout_rng_states(*replay->module);
      set_dropout_rng_states(*replay->module, replay->dropout_states);
      const at::AutoGradMode grad_mode(true);
      y = replay->fn(inputs.front(), others);
      set_dropout_rng_states(*replay->module, now);
    }
    torch::autograd::backward({y}, {grads[0]});
    torch::autograd::variable_list out;
    for (const at::Tensor& input : inputs) out.push_back(input.grad());
    out.emplace_back();  // the replay
    return out;
  }
};

}  // namespace

at::Tensor recompute_in_backward(torch::nn::Module& module, RecomputedFn fn, const at::Tensor& x,
                                 const std::vector<at::Tensor>& others) {
  if (!at::GradMode::is_enabled() || !x.requires_grad()) return fn(x, others);
  auto replay = c10::make_intrusive<Replay>();
  replay->module = &module;
  replay->fn = std::move(fn);
  replay->dropout_states = dropout_rng_states(module);
  return RecomputeFunction::apply(x, at::TensorList(others), replay);
}

at::Tensor recompute_in_backward(torch::nn::Module& module,
                                 std::function<at::Tensor(const at::Tensor&)> fn,
                                 const at::Tensor& x) {
  return recompute_in_backward(
      module,
      [fn = std::move(fn)](const at::Tensor& in, const std::vector<at::Tensor>&) { return fn(in); },
      x, {});
}

}  // namespace shardformer::layers
