// The SAM plugin: its policy table and factory.
#include "sam_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::sam {

// Megatron's split, as ColossalAI's SAM policy does: in the image encoder's layers the fused
// qkv column-parallel by heads (each rank its heads' q, k and v) and proj row-parallel, lin1
// column and lin2 row; in the mask decoder every attention's q / k / v column-parallel by heads
// and out_proj row-parallel, the two-way blocks' MLPs likewise. The relative position tables,
// norms, neck, prompt encoder, upscaling and the small heads stay replicated.
Policy sam_policy() {
  using namespace styles;
  const ShardStyle fused_qkv{.kind = ShardKind::kColumn, .fused_blocks = 3};  // [3, heads, dim]
  return Policy({
      {"vision_encoder.layers.*.attn.qkv", fused_qkv},
      {"vision_encoder.layers.*.attn.proj", row},
      {"vision_encoder.layers.*.mlp.lin1", column},
      {"vision_encoder.layers.*.mlp.lin2", row},
      {"mask_decoder.transformer.layers.*.self_attn.q_proj", column},
      {"mask_decoder.transformer.layers.*.self_attn.k_proj", column},
      {"mask_decoder.transformer.layers.*.self_attn.v_proj", column},
      {"mask_decoder.transformer.layers.*.self_attn.out_proj", row},
      {"mask_decoder.transformer.layers.*.cross_attn_token_to_image.q_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_token_to_image.k_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_token_to_image.v_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_token_to_image.out_proj", row},
      {"mask_decoder.transformer.layers.*.cross_attn_image_to_token.q_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_image_to_token.k_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_image_to_token.v_proj", column},
      {"mask_decoder.transformer.layers.*.cross_attn_image_to_token.out_proj", row},
      {"mask_decoder.transformer.final_attn_token_to_image.q_proj", column},
      {"mask_decoder.transformer.final_attn_token_to_image.k_proj", column},
      {"mask_decoder.transformer.final_attn_token_to_image.v_proj", column},
      {"mask_decoder.transformer.final_attn_token_to_image.out_proj", row},
      {"mask_decoder.transformer.layers.*.mlp.lin1", column},
      {"mask_decoder.transformer.layers.*.mlp.lin2", row},
  });
}

class SamFamily : public ModelFamily {
 public:
  std::string name() const override { return "sam"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Meta's Segment Anything Model (HF modeling_sam)";
  }
  std::vector<std::string> architectures() const override { return {"SamModel"}; }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const HFConfig& hf = args.checkpoint->config();
    const SamConfig config = SamConfig::from(hf);
    hf.require(hf.get_bool("tie_word_embeddings", true),
               "tie_word_embeddings false (a prompt encoder with a Gaussian matrix of its own) is "
               "not supported");
    const ModelBuilder builder(args, sam_policy(), "");
    return builder.finish(std::make_shared<SamModel>(builder.context(), config));
  }
};

}  // namespace shardformer::sam

SHARDFORMER_PLUGIN(shardformer::sam::SamFamily)
