// ModelBuilder: the parallel context and root build context of a family's model.
#include "shardformer/model_builder.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"

namespace shardformer {

ModelBuilder::ModelBuilder(const ModelArgs& args, const Policy& family_policy,
                           std::string base_model_prefix)
    : prefix_(std::move(base_model_prefix)),
      parallel_(with_family_policy(args.parallel, family_policy)),
      ctx_(*args.checkpoint, args.dtype, args.device, prefix_, &parallel_) {}

std::shared_ptr<Model> ModelBuilder::finish(std::shared_ptr<Model> model) const {
  if (!model) throw ModelError("the family built no model");
  model->eval();
  return model;
}

}  // namespace shardformer
