// ViT (HF ViTModel, ViTForImageClassification) with SDK blocks: the patch embedding (a
// convolution), the class token and learned positions (interpolated for other image sizes on
// request), pre-LN encoder layers with bidirectional attention, the final layernorm, the pooler,
// and the classifier on the class token. BEiT (BeitModel, BeitForImageClassification) is the same
// network with relative position bias tables (per layer or one shared), layer scale, an unbiased
// key and mean pooling. Shapes are per rank.
#pragma once

#include "vit_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/patch_embedding.h"
#include "shardformer/layers/pre_norm_block.h"
#include "shardformer/layers/relative_position_table.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <map>
#include <memory>
#include <string>

namespace shardformer::vit {

// Whether ctx's layers split their attention heads over tp (the policy's choice).
bool splits_heads(const BuildContext& layer);

// BEiT's relative position table: the whole image's patches and the class token.
layers::RelativePositionTableOptions relative_table_options(const ViTConfig& config);

// layernorm_before -> attention -> residual; layernorm_after -> intermediate / output -> residual
// (layers::pre_norm_block). BEiT: each branch scaled by lambda_1 / lambda_2 before its residual,
// its own bias table.
class ViTLayer : public torch::nn::Module {
 public:
  ViTLayer(const BuildContext& ctx, const ViTConfig& config, int64_t layer_idx);
  // [batch, tokens, hidden] -> same
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);

 private:
  // layernorm_before, attention, layernorm_after, the MLP; BEiT's lambda_1 / lambda_2 as the
  // layer scale.
  layers::PreNormSublayers sublayers_;
  std::shared_ptr<layers::MLP> mlp_;  // intermediate.dense, output.dense (registered here)
  std::shared_ptr<layers::RelativePositionTable>
      relative_position_bias_;  // BEiT's own table, or null
};

// HF ViTModel: its outputs are the last hidden state (after the final layernorm) and, with the
// pooler, act(dense(hidden[:, 0])). BeitModel: the pooler is pooler.layernorm over the mean of
// the patch tokens (mean pooling, no final layernorm) or the class token's state.
class ViTModel : public Model {
 public:
  ViTModel(const BuildContext& ctx, const ViTConfig& config, bool pooler);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, 1 + patches, hidden]
  std::map<std::string, at::Tensor> forward_all(const ForwardInputs& inputs) override;
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  // [batch, tokens, hidden] -> [batch, pooler_output_size]
  at::Tensor pool(const at::Tensor& hidden) const;

 private:
  // pixel_values [batch, channels, height, width] -> [batch, 1 + patches, hidden]
  at::Tensor embed(const ForwardInputs& inputs) const;

  ViTConfig config_;
  std::shared_ptr<layers::ClassTokenEmbedding> embeddings_;  // patches, cls_token, positions
  std::shared_ptr<layers::Dropout> embeddings_dropout_;
  layers::LayerStack<ViTLayer> layers_;
  std::shared_ptr<layers::LayerNorm> layernorm_;
  std::shared_ptr<layers::Linear> pooler_;
  std::shared_ptr<layers::LayerNorm> pooler_norm_;  // BEiT's mean pooling
  bool pools_ = false;
  std::shared_ptr<layers::RelativePositionTable> shared_bias_;  // BEiT's shared table (every stage)
};

// ViTForImageClassification: ViTModel under "vit" (no pooler) and a replicated classifier on the
// class token's final hidden state (num_labels rarely divides by tp). BeitForImageClassification:
// BeitModel under "beit" with its pooler, the classifier on the pooled output.
class ViTForImageClassification : public Model {
 public:
  ViTForImageClassification(const BuildContext& ctx, const ViTConfig& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, num_labels]
  ModelShape shape() const override { return vit_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kSequenceClassification; }

 private:
  bool beit_;  // the classifier reads the pooler's output
  std::shared_ptr<ViTModel> vit_;
  std::shared_ptr<layers::Linear> classifier_;
};

}  // namespace shardformer::vit
