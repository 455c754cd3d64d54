// Swin (HF SwinModel, SwinForImageClassification) with SDK blocks: the patch embedding and its
// norm, stages of pre-LN blocks attending within windows (every other block's windows shifted
// by half a window, with the mask of the shift) under a relative position bias table per block,
// patch merging between stages (the grid halved, the width doubled), the final layernorm, mean
// pooling and the classifier. Shapes are per rank.
#pragma once

#include "swin_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/drop_path.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/patch_embedding.h"
#include "shardformer/layers/patch_merging.h"
#include "shardformer/layers/relative_position_table.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::swin {

// One stage's windows in a forward pass, shared by its blocks.
struct SwinStep {
  int64_t height = 0, width = 0;  // the stage's patch grid
  int64_t window = 0;             // window_size
  int64_t shift = 0;              // the shifted blocks' shift: window / 2; 0 when one window spans
  at::Tensor shift_mask{};  // [windows, window^2, window^2] for the shifted blocks, or undefined
};

// HF SwinLayer (encoder.layers.<stage>.blocks.<block>): layernorm_before -> attention within
// windows (the odd blocks' grid rolled by -shift first) -> residual; layernorm_after ->
// intermediate / output -> residual.
class SwinLayer : public torch::nn::Module {
 public:
  SwinLayer(const BuildContext& ctx, const SwinConfig& config, int64_t stage, int64_t block);
  // [batch, height * width, dim] -> same
  at::Tensor forward(const at::Tensor& x, const SwinStep& step);

 private:
  bool shifted_;  // an odd block: its windows shifted
  std::shared_ptr<layers::LayerNorm> layernorm_before_, layernorm_after_;
  std::shared_ptr<layers::SelfAttention> attention_;
  std::shared_ptr<layers::RelativePositionTable> relative_position_bias_;
  std::shared_ptr<layers::MLP> mlp_;  // intermediate.dense, output.dense (registered here)
  std::shared_ptr<layers::Dropout> dropout_;
  std::shared_ptr<layers::DropPath> drop_path_;  // the attention branch's, as HF's; or null
};

// HF SwinModel: its outputs are the last hidden state (after the final layernorm) and the pooler
// output, the mean over the last stage's tokens.
class SwinModel : public Model {
 public:
  SwinModel(const BuildContext& ctx, const SwinConfig& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, tokens, num_features]
  std::map<std::string, at::Tensor> forward_all(const ForwardInputs& inputs) override;
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  // [batch, tokens, num_features] -> [batch, num_features]
  static at::Tensor pool(const at::Tensor& hidden) { return hidden.mean(1); }

 private:
  // One stage: this pipeline stage's blocks of it, and its patch merging when this pipeline
  // stage holds its last block and another stage follows.
  struct Stage {
    layers::LayerStack<SwinLayer> blocks;
    bool holds_blocks = false;
    std::shared_ptr<layers::PatchMerging> downsample;
  };

  // pixel_values [batch, channels, height, width] -> [batch, patches, embed_dim]
  at::Tensor embed(const ForwardInputs& inputs) const;
  // Stage `stage`'s windows for a patch grid of height x width.
  SwinStep step(int64_t stage, int64_t height, int64_t width,
                const at::TensorOptions& options) const;

  SwinConfig config_;
  std::shared_ptr<layers::PatchEmbedding> patch_embeddings_;
  std::shared_ptr<layers::LayerNorm> embeddings_norm_;
  at::Tensor position_embeddings_;  // [1, patches, embed_dim] (use_absolute_embeddings)
  std::shared_ptr<layers::Dropout> embeddings_dropout_;
  std::vector<Stage> stages_;
  std::shared_ptr<layers::LayerNorm> layernorm_;
};

// SwinForImageClassification: SwinModel under "swin" and a replicated classifier on its pooled
// output (num_labels rarely divides by tp).
class SwinForImageClassification : public Model {
 public:
  SwinForImageClassification(const BuildContext& ctx, const SwinConfig& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, num_labels]
  ModelShape shape() const override { return swin_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kSequenceClassification; }

 private:
  std::shared_ptr<SwinModel> swin_;
  std::shared_ptr<layers::Linear> classifier_;
};

}  // namespace shardformer::swin
