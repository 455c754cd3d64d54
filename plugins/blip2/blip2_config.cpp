// BLIP-2's config keys, read or refused by name.
#include "blip2_config.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

namespace shardformer::blip2 {
namespace {

Blip2VisionConfig vision_from(const HFConfig& c) {
  Blip2VisionConfig v{};
  v.hidden_size = c.get_int("hidden_size", 1408);
  v.intermediate_size = c.get_int("intermediate_size", 6144);
  v.num_hidden_layers = c.get_int("num_hidden_layers", 39);
  v.num_attention_heads = c.get_int("num_attention_heads", 16);
  v.image_size = c.get_int("image_size", 224);
  v.patch_size = c.get_int("patch_size", 14);
  v.layer_norm_eps = c.get_double("layer_norm_eps", 1e-6);
  v.attention_dropout = c.get_probability("attention_dropout", 0.0);
  v.qkv_bias = c.get_bool("qkv_bias", true);
  v.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  c.refuse_unread("vision_config keys BLIP-2's vision encoder does not implement");
  c.require(v.hidden_size % v.num_attention_heads == 0,
            "vision_config.hidden_size must divide by num_attention_heads");
  c.require(v.patch_size > 0 && v.image_size % v.patch_size == 0,
            "vision_config.image_size must be a multiple of patch_size");
  return v;
}

Blip2QFormerConfig qformer_from(const HFConfig& c) {
  Blip2QFormerConfig q{};
  q.hidden_size = c.get_int("hidden_size", 768);
  q.intermediate_size = c.get_int("intermediate_size", 3072);
  q.num_hidden_layers = c.get_int("num_hidden_layers", 12);
  q.num_attention_heads = c.get_int("num_attention_heads", 12);
  q.cross_attention_frequency = c.get_int("cross_attention_frequency", 2);
  q.encoder_hidden_size = c.get_int("encoder_hidden_size", 1408);
  q.layer_norm_eps = c.get_double("layer_norm_eps", 1e-12);
  q.hidden_dropout_prob = c.get_probability("hidden_dropout_prob", 0.1);
  q.attention_probs_dropout_prob = c.get_probability("attention_probs_dropout_prob", 0.1);
  q.use_qformer_text_input = c.get_bool("use_qformer_text_input", false);
  q.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  // The Q-Former's text embeddings belong to the retrieval models (Blip2TextModelWithProjection);
  // the model that captions has none, so their sizes change nothing here.
  c.ignore({"vocab_size", "max_position_embeddings", "position_embedding_type"});
  c.refuse_unread("qformer_config keys BLIP-2's Q-Former does not implement");
  c.require(q.hidden_size % q.num_attention_heads == 0,
            "qformer_config.hidden_size must divide by num_attention_heads");
  c.require(q.cross_attention_frequency > 0,
            "qformer_config.cross_attention_frequency must be positive");
  return q;
}

}  // namespace

Blip2Config Blip2Config::from(const HFConfig& c) {
  c.require(c.model_type() == "blip-2", "model_type '" + c.model_type() + "' is not blip-2");
  Blip2Config b{};
  b.vision = vision_from(c.sub_config("vision_config"));
  b.qformer = qformer_from(c.sub_config("qformer_config"));
  const HFConfig text = c.sub_config("text_config");
  const bool decoder_only = c.get_bool("use_decoder_only_language_model", true);
  c.require(c.get_bool("is_encoder_decoder", !decoder_only) == !decoder_only,
            "is_encoder_decoder disagrees with use_decoder_only_language_model");
  const std::string wanted = decoder_only ? "opt" : "t5";
  text.require(
      text.model_type() == wanted,
      str("text_config.model_type '", text.model_type(), "' is not supported with ",
          "use_decoder_only_language_model ", decoder_only ? "true" : "false",
          ": BLIP-2 runs here with ", decoder_only ? "an OPT" : "a T5", " language model"));
  if (decoder_only) {
    b.opt = opt::OPTConfig::from(text);
    text.refuse_unread("text_config keys the OPT language model does not implement");
    c.require(b.opt->word_embed_proj_dim == b.opt->hidden_size,
              "text_config.word_embed_proj_dim must equal its hidden_size (the image features "
              "take the place of token embeddings)");
    b.text_hidden_size = b.opt->hidden_size;
    b.text_vocab_size = b.opt->vocab_size;
  } else {
    b.t5 = t5::T5Config::from(text);
    text.refuse_unread("text_config keys the T5 language model does not implement");
    b.text_hidden_size = b.t5->d_model;
    b.text_vocab_size = b.t5->vocab_size;
  }
  b.num_query_tokens = c.get_int("num_query_tokens", 32);
  b.image_token_index =
      c.has("image_token_id") ? c.get_int("image_token_id") : c.get_int("image_token_index");
  // The projection of image and text features for retrieval (Blip2ForImageTextRetrieval).
  c.ignore({"image_text_hidden_size"});
  c.require(b.qformer.encoder_hidden_size == b.vision.hidden_size,
            str("qformer_config.encoder_hidden_size (", b.qformer.encoder_hidden_size,
                ") must equal vision_config.hidden_size (", b.vision.hidden_size, ")"));
  c.require(b.image_token_index >= 0 && b.image_token_index < b.text_vocab_size,
            str("image_token_index ", b.image_token_index, " is outside the vocabulary [0, ",
                b.text_vocab_size, ")"));
  c.require(b.num_query_tokens > 0, "num_query_tokens must be positive");
  return b;
}

}  // namespace shardformer::blip2
