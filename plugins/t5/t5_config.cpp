// T5's config keys as HF's configuration_t5.py reads them.
#include "t5_config.h"

#include "shardformer/strings.h"

namespace shardformer::t5 {

T5Config T5Config::from(const HFConfig& c) {
  T5Config t{};
  c.require(c.model_type() == "t5", "model_type '" + c.model_type() + "' is not a T5 model");
  t.vocab_size = c.get_int("vocab_size");
  t.d_model = c.get_int("d_model");
  t.d_kv = c.get_int("d_kv");
  t.d_ff = c.get_int("d_ff");
  t.num_heads = c.get_int("num_heads");
  t.num_layers = c.get_int("num_layers");
  t.num_decoder_layers = c.get_optional_int("num_decoder_layers").value_or(t.num_layers);
  t.relative_attention_num_buckets = c.get_int("relative_attention_num_buckets", 32);
  t.relative_attention_max_distance = c.get_int("relative_attention_max_distance", 128);
  t.dropout_rate = c.get_probability("dropout_rate", 0.1);
  t.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-6);
  // feed_forward_proj "ACT" or "gated-ACT"; HF maps "gated-gelu" to gelu_new. Newer configs also
  // store what HF derives from it (dense_act_fn, is_gated_act): they must agree.
  const std::string proj = c.get_string("feed_forward_proj", "relu");
  t.is_gated_act = proj.starts_with("gated-");
  const std::string act = t.is_gated_act ? proj.substr(6) : proj;
  c.require(act.find('-') == std::string::npos,
            str("feed_forward_proj '", proj, "' is neither ACT nor gated-ACT"));
  const std::string derived = proj == "gated-gelu" ? "gelu_new" : act;
  c.require(c.get_string("dense_act_fn", derived) == derived,
            str("dense_act_fn disagrees with feed_forward_proj '", proj, "'"));
  c.require(c.get_bool("is_gated_act", t.is_gated_act) == t.is_gated_act,
            str("is_gated_act disagrees with feed_forward_proj '", proj, "'"));
  t.dense_act_fn = layers::parse_activation(derived, c.path().string() + ": feed_forward_proj");
  // HF 5 writes scale_decoder_outputs; older configs say it by tie_word_embeddings (T5 v1.0's
  // tied head scales, v1.1's untied one does not).
  const bool tied = c.get_bool("tie_word_embeddings", true);
  t.scale_decoder_outputs = c.get_bool("scale_decoder_outputs", tied);
  t.decoder_start_token_id = c.get_int("decoder_start_token_id", 0);
  t.pad_token_id = c.get_int("pad_token_id", 0);
  c.require(c.get_bool("is_encoder_decoder", true), "is_encoder_decoder = false");
  c.require(!c.get_bool("is_decoder", false), "is_decoder = true (a decoder-only T5 stack)");
  c.ignore({"initializer_factor"});  // weight initialisation only
  c.ignore({"classifier_dropout"});  // T5ForSequenceClassification's, not served
  c.require(t.vocab_size > 0 && t.d_model > 0 && t.d_kv > 0 && t.d_ff > 0 && t.num_heads > 0 &&
                t.num_layers > 0 && t.num_decoder_layers > 0,
            "sizes must be positive");
  c.require(t.relative_attention_num_buckets >= 4 && t.relative_attention_max_distance > 0,
            "relative_attention_num_buckets must be at least 4 and max_distance positive");
  return t;
}

}  // namespace shardformer::t5
