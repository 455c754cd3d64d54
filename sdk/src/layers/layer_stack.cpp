// The module holding a stage's transformer layers and how many of them recompute in backward.
#include "shardformer/layers/layer_stack.h"

namespace shardformer::layers {

LayerList::LayerList(const BuildContext& ctx, std::vector<int64_t> chunk_layers)
    : chunk_layers_(std::move(chunk_layers)), recomputed_(chunk_layers_.size(), 0) {
  if (const PipelineStageManager* pipeline = ctx.pipeline()) {
    stage_ = pipeline->stage();
    num_stages_ = pipeline->num_stages();
  }
}

void LayerList::set_recompute(const RecomputePolicy& policy) {
  const auto chunks = static_cast<int64_t>(chunk_layers_.size());
  for (int64_t c = 0; c < chunks; ++c) {
    recomputed_[static_cast<size_t>(c)] =
        policy.layers(chunk_layers_[static_cast<size_t>(c)], stage_, num_stages_, c, chunks);
  }
}

}  // namespace shardformer::layers
