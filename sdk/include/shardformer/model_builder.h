// What a family's ModelFamily::create() builds with: the job's parallel context with the
// family's policy first (the job's override rules win), and the root BuildContext for HF's
// base-model prefix. A family's create() is then a few lines.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/causal_lm.h"
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

  // HF's pair of classes of a decoder family: with_head, Base under the base-model prefix and
  // CausalLM's head over it (tied to Base::token_embedding() or lm_head.weight of its own);
  // else Base alone, an LM checkpoint's head declared unused. Base is built as
  // Base(context, config, bool embedding_on_last_stage).
  template <typename Base, typename Config>
  std::shared_ptr<Model> decoder(bool with_head, const Config& config, bool tied,
                                 int64_t vocab_size, int64_t hidden_size,
                                 const LMHeadOptions& head = {}) const {
    if (!with_head) {
      ctx_.skip(head.name + ".weight", "a base model has no LM head");
      if (head.bias) ctx_.skip(head.name + ".bias", "a base model has no LM head");
      return finish(std::make_shared<Base>(ctx_, config, false));
    }
    auto base = std::make_shared<Base>(ctx_.child(prefix_), config, tied);
    return finish(std::make_shared<CausalLM>(ctx_, prefix_, base, base->token_embedding(), tied,
                                             vocab_size, hidden_size, head));
  }

 private:
  std::string prefix_;
  ParallelContext parallel_;
  BuildContext ctx_;
};

}  // namespace shardformer
