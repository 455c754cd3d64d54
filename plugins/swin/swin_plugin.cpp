// The Swin plugin: its policy table and factory.
#include "swin_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::swin {

// Megatron's split within each block, as for ViT: query / key / value and intermediate
// column-parallel, the attention output and output dense row-parallel (two all-reduces per
// block); each block's relative position bias table follows its heads (each rank holds its
// heads' columns). The patch embedding, norms, patch merging, pooler and classifier stay
// replicated.
Policy swin_policy() {
  using namespace styles;
  return Policy({
      {"encoder.layers.*.blocks.*.attention.self.query", column},
      {"encoder.layers.*.blocks.*.attention.self.key", column},
      {"encoder.layers.*.blocks.*.attention.self.value", column},
      {"encoder.layers.*.blocks.*.attention.output.dense", row},
      {"encoder.layers.*.blocks.*.intermediate.dense", column},
      {"encoder.layers.*.blocks.*.output.dense", row},
  });
}

class SwinFamily : public ModelFamily {
 public:
  std::string name() const override { return "swin"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Microsoft's Swin Transformer (HF modeling_swin)";
  }
  std::vector<std::string> architectures() const override {
    return {"SwinModel", "SwinForImageClassification"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const SwinConfig config = SwinConfig::from(args.checkpoint->config());
    const ModelBuilder builder(args, swin_policy(), "swin");
    const BuildContext& ctx = builder.context();
    if (args.architecture == "SwinForImageClassification") {
      return builder.finish(std::make_shared<SwinForImageClassification>(ctx, config));
    }
    ctx.skip_module("classifier", "the base model has no classifier");
    return builder.finish(std::make_shared<SwinModel>(ctx, config));
  }
};

}  // namespace shardformer::swin

SHARDFORMER_PLUGIN(shardformer::swin::SwinFamily)
