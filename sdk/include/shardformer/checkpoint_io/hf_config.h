// config.json of a HuggingFace checkpoint, with typed getters whose errors name the file
// and the key. Plugins read their hyper-parameters through it.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer {

class HFConfig {
 public:
  HFConfig();
  ~HFConfig();
  HFConfig(HFConfig&&) noexcept;
  HFConfig& operator=(HFConfig&&) noexcept;

  // Throws CheckpointError naming the file for a missing file or invalid JSON (with its
  // line and column) or a top level that is not an object.
  static HFConfig load(const std::filesystem::path& path);
  static HFConfig parse(const std::string& text, const std::filesystem::path& source);

  const std::filesystem::path& path() const;
  // "architectures" (may be empty) and "model_type" ("" when absent).
  std::vector<std::string> architectures() const;
  std::string model_type() const;

  bool has(const std::string& key) const;
  // Every top-level key of the file, in file order.
  std::vector<std::string> keys() const;
  // Whether a getter (or has(), or ignore()) asked for `key`: the checkpoint-usage check
  // refuses keys of the file that no code read.
  bool was_read(const std::string& key) const;
  // Whether `key` is absent or holds null, false, 0, "", [] or {} (HF's defaults for switches
  // such as is_decoder or pruned_heads). Does not count as reading the key.
  bool holds_default(const std::string& key) const;
  // Throws ModelError "<config.json>: what" unless ok: for values a model does not support.
  void require(bool ok, std::string_view what) const;
  // Declares keys that the model knows and that do not change what it computes (e.g. GPT-2's
  // summary_* keys, which only GPT2DoubleHeadsModel reads).
  void ignore(std::initializer_list<std::string_view> keys) const;
  // Typed getters: throw CheckpointError naming the file and key when the key is missing
  // (for the variants without a fallback) or holds another type.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  // The object under `key` (e.g. rope_parameters) as a config of its own, whose errors name
  // 'key.subkey'; nullopt when absent or null. Throws CheckpointError for another type.
  std::optional<HFConfig> get_object(const std::string& key) const;
  // A composite model's sub-model config (SAM's vision_config, BLIP-2's text_config): the object
  // under `key`, its descriptors (model_type, transformers_version, dtype, initializer_range)
  // read as changing nothing computed. Throws CheckpointError naming the key when it is missing.
  HFConfig sub_config(const std::string& key) const;
  // Throws CheckpointError naming every key of this (nested) config that no getter read and
  // that changes what a model computes (harmless_config_key), with `why`: for objects whose
  // keys must all be understood.
  void refuse_unread(std::string_view why) const;
  // A dropout probability: throws CheckpointError naming the key unless it is in [0, 1).
  double get_probability(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // An array of strings (e.g. layer_types); nullopt when absent or null.
  std::optional<std::vector<std::string>> get_string_list(const std::string& key) const;
  // An array of integers (Swin's depths and num_heads per stage); nullopt when absent or null.
  std::optional<std::vector<int64_t>> get_int_list(const std::string& key) const;
  // A size given as one integer n (n, n) or a list of two (vision models' image_size and
  // patch_size, as [height, width]); {fallback, fallback} when absent or null.
  std::array<int64_t, 2> get_int_pair(const std::string& key, int64_t fallback) const;
  // An integer that may be null or absent (e.g. GPT-2's n_inner).
  std::optional<int64_t> get_optional_int(const std::string& key) const;
  // The transformer layer count under the names HF families use (num_hidden_layers, n_layer,
  // num_layers, n_layers), as a pipeline needs it before the model is built.
  std::optional<int64_t> num_hidden_layers() const;
  // The layers a pipeline splits: an encoder-decoder's (is_encoder_decoder) encoder and decoder
  // layers together, T5's num_layers + num_decoder_layers or BART's and Whisper's
  // encoder_layers + decoder_layers; a hierarchical vision model's (Swin) blocks of every stage,
  // its depths summed; otherwise num_hidden_layers().
  std::optional<int64_t> pipeline_layers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `key` of `config` (the file's top level or a nested sub-model config) is one of HF's
// PretrainedConfig keys that never change what a model computes (bookkeeping, output switches,
// special token ids, generation defaults), or a switch at its default.
bool harmless_config_key(const HFConfig& config, const std::string& key);

}  // namespace shardformer
