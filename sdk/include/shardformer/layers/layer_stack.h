// The transformer layers a pipeline stage holds, per model chunk, registered under one module
// ("h", "layers") with their global index as name ("h.5" on a stage holding layers 4 to 7), so
// parameter names stay HF's at every layout.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace shardformer::layers {

template <typename Layer>
class LayerStack {
 public:
  LayerStack() = default;
  // Builds this stage's layers of a model of num_layers: make(layer_ctx, index) for each,
  // registered under parent's module `name` (ctx is parent's context).
  template <typename Make>
  LayerStack(torch::nn::Module& parent, const BuildContext& ctx, const std::string& name,
             int64_t num_layers, Make make) {
    auto holder = parent.register_module(name, std::make_shared<torch::nn::Module>());
    const BuildContext list = ctx.child(name);
    for (const LayerRange& range : ctx.layer_ranges(num_layers)) {
      first_.push_back(range.begin);
      auto& chunk = chunks_.emplace_back();
      for (int64_t i = range.begin; i < range.end; ++i) {
        chunk.push_back(holder->register_module(std::to_string(i), make(list.child(i), i)));
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

 private:
  void check(int64_t chunk) const {
    if (chunk < 0 || chunk >= static_cast<int64_t>(chunks_.size())) {
      throw Error(
          str("model chunk ", chunk, " requested from a stage of ", chunks_.size(), " chunks"));
    }
  }

  std::vector<std::vector<std::shared_ptr<Layer>>> chunks_;
  std::vector<int64_t> first_;
};

}  // namespace shardformer::layers
