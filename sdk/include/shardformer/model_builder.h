// What a family's ModelFamily::create() builds with: the job's parallel context with the
// family's policy first (the job's override rules win), and the root BuildContext for HF's
// base-model prefix. A family's create() is then a few lines.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/model.h"

#include <memory>
#include <string>

namespace shardformer {

class ModelBuilder {
 public:
  ModelBuilder(const ModelArgs& args, const Policy& family_policy, std::string base_model_prefix);
  ModelBuilder(const ModelBuilder&) = delete;
  ModelBuilder& operator=(const ModelBuilder&) = delete;

  const BuildContext& context() const { return ctx_; }
  // The built model, in eval mode (as HF's from_pretrained returns it).
  std::shared_ptr<Model> finish(std::shared_ptr<Model> model) const;

 private:
  ParallelContext parallel_;
  BuildContext ctx_;
};

}  // namespace shardformer
