// The T5 plugin: its factory (the policy table: t5_policy.cpp).
#include "t5_model.h"
#include "t5_policy.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::t5 {

class T5Family : public ModelFamily {
 public:
  std::string name() const override { return "t5"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Google T5, T5 v1.1 and flan-T5 (HF modeling_t5)";
  }
  std::vector<std::string> architectures() const override {
    return {"T5ForConditionalGeneration", "T5EncoderModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const T5Config config = T5Config::from(args.checkpoint->config());
    const ModelBuilder builder(args, Policy(t5_rules(), t5_shared_parameters()), "");
    if (args.architecture == "T5EncoderModel") {
      return builder.finish(std::make_shared<T5EncoderModel>(builder.context(), config));
    }
    return builder.finish(std::make_shared<T5ForConditionalGeneration>(builder.context(), config));
  }
};

}  // namespace shardformer::t5

SHARDFORMER_PLUGIN(shardformer::t5::T5Family)
