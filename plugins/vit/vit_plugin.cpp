// The ViT plugin (ViT and BEiT): its policy table and factory.
#include "vit_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::vit {

// Megatron's split, as ColossalAI's ViT policy: query / key / value and intermediate
// column-parallel, the attention output and output dense row-parallel (two all-reduces per
// layer). The patch embedding, class token, positions, norms, pooler and classifier stay
// replicated (a rule "embeddings.patch_embeddings.projection" = column splits the convolution's
// output channels instead). BEiT's relative position bias tables follow their layer's heads: each
// rank holds its heads' columns. The shared table is held by every pipeline stage.
Policy vit_policy() {
  using namespace styles;
  return Policy(
      {
          {"encoder.layer.*.attention.attention.query", column},
          {"encoder.layer.*.attention.attention.key", column},
          {"encoder.layer.*.attention.attention.value", column},
          {"encoder.layer.*.attention.output.dense", row},
          {"encoder.layer.*.intermediate.dense", column},
          {"encoder.layer.*.output.dense", row},
      },
      {"encoder.relative_position_bias.relative_position_bias_table"});
}

class ViTFamily : public ModelFamily {
 public:
  std::string name() const override { return "vit"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Google's Vision Transformer and Microsoft's BEiT (HF modeling_vit, modeling_beit)";
  }
  std::vector<std::string> architectures() const override {
    return {"ViTModel", "ViTForImageClassification", "BeitModel", "BeitForImageClassification"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const ViTConfig config = ViTConfig::from(args.checkpoint->config());
    const ModelBuilder builder(args, vit_policy(), config.base_name());
    const BuildContext& ctx = builder.context();
    if (args.architecture.starts_with("Beit") != config.beit) {
      throw CheckpointError(args.checkpoint->config().path().string() + ": architecture " +
                            args.architecture + " does not match model_type " +
                            args.checkpoint->config().model_type());
    }
    if (args.architecture.ends_with("ForImageClassification")) {
      return builder.finish(std::make_shared<ViTForImageClassification>(ctx, config));
    }
    ctx.skip_module("classifier", "the base model has no classifier");
    return builder.finish(std::make_shared<ViTModel>(ctx, config, true));
  }
};

}  // namespace shardformer::vit

SHARDFORMER_PLUGIN(shardformer::vit::ViTFamily)
