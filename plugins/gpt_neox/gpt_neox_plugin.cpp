// The GPT-NeoX plugin (Pythia, GPT-NeoX-20B): its policy table and factory.
#include "gpt_neox_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::gpt_neox {

// Megatron's split, as HF's own tp plan: the fused query_key_value column-parallel by whole
// heads (its rows are per-head [q k v] groups), dense and dense_4h_to_h row-parallel,
// dense_h_to_4h column-parallel; the vocabulary split in embed_in and embed_out. Norms
// replicated. Two all-reduces per layer.
Policy gpt_neox_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"embed_in", vocab},
          {"embed_out", vocab},
          {"layers.*.attention.query_key_value", column},
          {"layers.*.attention.dense", row},
          {"layers.*.mlp.dense_h_to_4h", column},
          {"layers.*.mlp.dense_4h_to_h", row},
      },
      tied ? std::vector<std::string>{"embed_in.weight"} : std::vector<std::string>{});
}

class GPTNeoXFamily : public ModelFamily {
 public:
  std::string name() const override { return "gpt_neox"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "EleutherAI GPT-NeoX and Pythia (HF modeling_gpt_neox)";
  }
  std::vector<std::string> architectures() const override {
    return {"GPTNeoXForCausalLM", "GPTNeoXModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const GPTNeoXConfig config = GPTNeoXConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, gpt_neox_policy(tied), "gpt_neox");
    return builder.decoder<GPTNeoXModel>(args.architecture == "GPTNeoXForCausalLM", config, tied,
                                         config.vocab_size, config.hidden_size,
                                         {.name = "embed_out"});
  }
};

}  // namespace shardformer::gpt_neox

SHARDFORMER_PLUGIN(shardformer::gpt_neox::GPTNeoXFamily)
