// The ViT plugin: its policy table and factory.
#include "vit_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::vit {

// Megatron's split, as ColossalAI's ViT policy: query / key / value and intermediate
// column-parallel, the attention output and output dense row-parallel (two all-reduces per
// layer). The patch embedding, class token, positions, norms, pooler and classifier stay
// replicated (a rule "embeddings.patch_embeddings.projection" = column splits the convolution's
// output channels instead).
Policy vit_policy() {
  using namespace styles;
  return Policy({
      {"encoder.layer.*.attention.attention.query", column},
      {"encoder.layer.*.attention.attention.key", column},
      {"encoder.layer.*.attention.attention.value", column},
      {"encoder.layer.*.attention.output.dense", row},
      {"encoder.layer.*.intermediate.dense", column},
      {"encoder.layer.*.output.dense", row},
  });
}

class ViTFamily : public ModelFamily {
 public:
  std::string name() const override { return "vit"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Google's Vision Transformer (HF modeling_vit)";
  }
  std::vector<std::string> architectures() const override {
    return {"ViTModel", "ViTForImageClassification"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const ViTConfig config = ViTConfig::from(args.checkpoint->config());
    const ModelBuilder builder(args, vit_policy(), "vit");
    const BuildContext& ctx = builder.context();
    if (args.architecture == "ViTForImageClassification") {
      return builder.finish(std::make_shared<ViTForImageClassification>(ctx, config));
    }
    ctx.skip_module("classifier", "the base model has no classifier");
    return builder.finish(std::make_shared<ViTModel>(ctx, config, true));
  }
};

}  // namespace shardformer::vit

SHARDFORMER_PLUGIN(shardformer::vit::ViTFamily)
