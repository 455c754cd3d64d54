// Whisper's config keys as HF's configuration_whisper.py reads them.
#include "whisper_config.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

namespace shardformer::whisper {

WhisperConfig WhisperConfig::from(const HFConfig& c) {
  WhisperConfig w{};
  c.require(c.model_type() == "whisper",
            "model_type '" + c.model_type() + "' is not a Whisper model");
  w.vocab_size = c.get_int("vocab_size");
  w.num_mel_bins = c.get_int("num_mel_bins", 80);
  w.d_model = c.get_int("d_model");
  w.encoder_layers = c.get_int("encoder_layers");
  w.encoder_attention_heads = c.get_int("encoder_attention_heads");
  w.encoder_ffn_dim = c.get_int("encoder_ffn_dim");
  w.decoder_layers = c.get_int("decoder_layers");
  w.decoder_attention_heads = c.get_int("decoder_attention_heads");
  w.decoder_ffn_dim = c.get_int("decoder_ffn_dim");
  w.max_source_positions = c.get_int("max_source_positions", 1500);
  w.max_target_positions = c.get_int("max_target_positions", 448);
  w.decoder_start_token_id = c.get_int("decoder_start_token_id", 50257);
  w.pad_token_id = c.get_int("pad_token_id", 50256);
  w.dropout = c.get_probability("dropout", 0.0);
  w.attention_dropout = c.get_probability("attention_dropout", 0.0);
  w.activation_dropout = c.get_probability("activation_dropout", 0.0);
  w.activation_function = layers::config_activation(c, "activation_function", "gelu");
  w.scale_embedding = c.get_bool("scale_embedding", false);
  c.require(c.get_bool("is_encoder_decoder", true), "is_encoder_decoder = false");
  c.require(c.get_bool("tie_word_embeddings", true),
            "tie_word_embeddings = false (Whisper's proj_out is the decoder's embedding)");
  // Training-time augmentation and layer dropping: refused when on, their settings unused.
  c.require(!c.get_bool("apply_spec_augment", false),
            "apply_spec_augment = true (SpecAugment in training) is not supported");
  c.ignore({"mask_time_prob", "mask_time_length", "mask_time_min_masks", "mask_feature_prob",
            "mask_feature_length", "mask_feature_min_masks"});
  c.require(c.get_double("encoder_layerdrop", 0.0) == 0.0 &&
                c.get_double("decoder_layerdrop", 0.0) == 0.0,
            "encoder_layerdrop / decoder_layerdrop > 0 (layers skipped in training)");
  // WhisperForAudioClassification's head, the timestamp aligner's filter, initialisation.
  c.ignore({"classifier_proj_size", "use_weighted_layer_sum", "median_filter_width", "init_std"});
  // Older configs: num_hidden_layers is encoder_layers under HF's attribute map.
  if (const std::optional<int64_t> layers = c.get_optional_int("num_hidden_layers")) {
    c.require(*layers == w.encoder_layers, "num_hidden_layers differs from encoder_layers");
  }
  c.require(
      w.d_model % w.encoder_attention_heads == 0 && w.d_model % w.decoder_attention_heads == 0,
      "d_model must divide by the attention heads");
  c.require(w.vocab_size > 0 && w.num_mel_bins > 0 && w.encoder_layers > 0 &&
                w.decoder_layers > 0 && w.max_source_positions > 0 && w.max_target_positions > 0,
            "sizes must be positive");
  return w;
}

}  // namespace shardformer::whisper
