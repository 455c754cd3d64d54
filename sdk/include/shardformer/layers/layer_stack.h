// The transformer layers a pipeline stage holds, per model chunk, registered under one module
// ("h", "layers") with their global index as name ("h.5" on a stage holding layers 4 to 7), so
// parameter names stay HF's at every layout; forward() runs them, recomputing the ones the
// model's RecomputePolicy names in backward.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/error.h"
#include "shardformer/layers/recompute.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/strings.h"

#include <torch/nn/module.h>

#include <concepts>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::layers {

// The module holding a stage's layers: where they sit in the pipeline and how many of each
// chunk's recompute (Model::set_recompute sets it on every LayerList of a model).
class LayerList : public torch::nn::Module {
 public:
  LayerList(const BuildContext& ctx, std::vector<int64_t> chunk_layers);
  // Throws ConfigError when the policy does not fit this stage.
  void set_recompute(const RecomputePolicy& policy);
  int64_t recomputed(int64_t chunk) const { return recomputed_[static_cast<size_t>(chunk)]; }

 private:
  int64_t stage_ = 0, num_stages_ = 1;
  std::vector<int64_t> chunk_layers_, recomputed_;
};

// A pre-norm layer that takes its input already normed and norms its output for the next one:
// input_norm() is the norm its forward starts with (null: none), and forward(in, step, next)
// reads in.sum, with in.normed = input_norm() of it when defined (else it norms in.sum itself),
// and returns its output with next's norm of it (undefined when next is null). The sum at the
// end of one layer and the norm at the start of the next then take one pass over memory
// (add_to_residual), under tp joined to the row-parallel layer's all-reduce.
template <typename Layer, typename Step>
concept HandsOnNorm = requires(Layer& layer, const ResidualSum& in, const Step& step,
                               const ResidualNorm* next) {
  { layer.input_norm() } -> std::convertible_to<const ResidualNorm*>;
  { layer.forward(in, step, next) } -> std::same_as<ResidualSum>;
};

// Where a stack's layers sit in a model of several stacks (an encoder-decoder's decoder: after
// the encoder's): layers [first, first + its count) of the model's total.
struct StackSpan {
  int64_t first = 0, total = 0;  // total 0: the stack is the whole model
};

template <typename Layer>
class LayerStack {
 public:
  LayerStack() = default;
  // Builds this stage's layers of a model of num_layers (or of the stack at `span`):
  // make(layer_ctx, index) for each, index counted within the stack, registered under parent's
  // module `name` (ctx is parent's context).
  template <typename Make>
  LayerStack(torch::nn::Module& parent, const BuildContext& ctx, const std::string& name,
             int64_t num_layers, Make make, StackSpan span = {}) {
    const std::vector<LayerRange> ranges =
        span.total > 0 ? ctx.layer_ranges(span.total, span.first, num_layers)
                       : ctx.layer_ranges(num_layers);
    std::vector<int64_t> sizes;
    for (const LayerRange& range : ranges) sizes.push_back(range.size());
    list_ = parent.register_module(name, std::make_shared<LayerList>(ctx, sizes));
    const BuildContext list = ctx.child(name);
    for (const LayerRange& range : ranges) {
      first_.push_back(range.begin);
      auto& chunk = chunks_.emplace_back();
      for (int64_t i = range.begin; i < range.end; ++i) {
        chunk.push_back(list_->register_module(std::to_string(i), make(list.child(i), i)));
      }
    }
  }

  // This stage's layers of chunk `chunk` (0 without an interleaved pipeline).
  const std::vector<std::shared_ptr<Layer>>& chunk(int64_t chunk) const {
    check(chunk);
    return chunks_[static_cast<size_t>(chunk)];
  }
  // The global index of the chunk's first layer: its KV cache length is the past length.
  int64_t first_layer(int64_t chunk) const {
    check(chunk);
    return first_[static_cast<size_t>(chunk)];
  }
  const std::shared_ptr<Layer>& front() const { return chunks_.front().front(); }
  // Whether this stage holds any layer of the stack.
  bool empty() const {
    for (const auto& chunk : chunks_) {
      if (!chunk.empty()) return false;
    }
    return true;
  }

  // x through the chunk's layers: x = layer->forward(x, step). A recomputed layer keeps a copy
  // of `step` for its replay in backward. Layers that hand on their norms (HandsOnNorm) pass
  // each other {x, normed x} when none is recomputed.
  template <typename Step>
  at::Tensor forward(int64_t chunk, at::Tensor x, const Step& step) const {
    const int64_t recomputed = is_training() ? list_->recomputed(chunk) : 0;
    if constexpr (HandsOnNorm<Layer, Step>) {
      if (recomputed == 0) {
        const std::vector<std::shared_ptr<Layer>>& layers = this->chunk(chunk);
        ResidualSum h{std::move(x), at::Tensor()};
        for (size_t i = 0; i < layers.size(); ++i) {
          h = layers[i]->forward(h, step,
                                 i + 1 < layers.size() ? layers[i + 1]->input_norm() : nullptr);
        }
        return h.sum;
      }
    }
    int64_t index = 0;
    for (const std::shared_ptr<Layer>& layer : this->chunk(chunk)) {
      if (index++ < recomputed) {
        if constexpr (HasDifferentiableInputs<Step>) {
          x = recompute_in_backward(
              *layer,
              [layer, step](const at::Tensor& in, const std::vector<at::Tensor>& others) {
                return layer->forward(in, step.with_inputs(others));
              },
              x, step.differentiable_inputs());
        } else {
          x = recompute_in_backward(
              *layer, [layer, step](const at::Tensor& in) { return layer->forward(in, step); }, x);
        }
      } else {
        x = layer->forward(x, step);
      }
    }
    return x;
  }

 private:
  bool is_training() const { return list_ != nullptr && list_->is_training(); }
  void check(int64_t chunk) const {
    if (chunk < 0 || chunk >= static_cast<int64_t>(chunks_.size())) {
      throw Error(
          str("model chunk ", chunk, " requested from a stage of ", chunks_.size(), " chunks"));
    }
  }

  std::shared_ptr<LayerList> list_;
  std::vector<std::vector<std::shared_ptr<Layer>>> chunks_;
  std::vector<int64_t> first_;
};

}  // namespace shardformer::layers
