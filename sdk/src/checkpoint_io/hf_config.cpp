// HFConfig: config.json of a HuggingFace checkpoint behind typed getters, plus the SDK's
// shared JSON parsing helpers (json_file.h) whose errors give the file, line and column.
#include "shardformer/checkpoint_io/hf_config.h"

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <system_error>

namespace shardformer {
namespace detail {
namespace {

// 1-based line and column of the character at 0-based `index` of `text`.
struct TextPosition {
  size_t line;
  size_t column;
};

TextPosition position_of(std::string_view text, size_t index) {
  index = std::min(index, text.size());
  std::string_view prefix = text.substr(0, index);
  size_t line = 1 + static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '\n'));
  size_t last_newline = prefix.rfind('\n');
  size_t column = last_newline == std::string_view::npos ? index + 1 : index - last_newline;
  return {line, column};
}

// Index of the bracket that opens nesting level kMaxJsonDepth + 1 of `text`, or npos. Brackets
// inside strings do not count. nlohmann parses any depth, but copying, printing and comparing
// values recurse: a deeper document could exhaust the stack.
size_t too_deep_at(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code error;  // set for a missing file too
  const auto status = std::filesystem::status(path, error);
  if (error && status.type() != std::filesystem::file_type::not_found) {  // e.g. a path too long
    throw CheckpointError(str(path.string(), ": cannot read the file: ", error.message()));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw CheckpointError(str(path.string(), std::filesystem::exists(status)
                                                 ? ": not a regular file"
                                                 : ": file not found"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    throw CheckpointError(str(path.string(), ": cannot read the file: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw CheckpointError(str(path.string(), ": cannot read the file"));
  return text.str();
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::filesystem::path& source,
                               const nlohmann::json::parser_callback_t& callback) {
  if (size_t at_index = too_deep_at(text); at_index != std::string_view::npos) {
    TextPosition at = position_of(text, at_index);
    throw CheckpointError(str(source.string(), ": invalid JSON at line ", at.line, ", column ",
                              at.column, " (byte ", at_index + 1, "): nested deeper than ",
                              kMaxJsonDepth, " levels"));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the characters read, the offending one included.
    TextPosition at = position_of(text, e.byte > 0 ? e.byte - 1 : 0);
    throw CheckpointError(str(source.string(), ": invalid JSON at line ", at.line, ", column ",
                              at.column, " (byte ", e.byte, "): ", e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond the range of a double (1e999): nlohmann reports it without a position.
    throw CheckpointError(str(source.string(), ": invalid JSON: ", e.what()));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_text_file(path), path);
}

std::string describe_json(const nlohmann::json& value) {
  constexpr size_t kMaxShown = 40;
  std::string shown = value.dump();
  if (shown.size() > kMaxShown) shown = shown.substr(0, kMaxShown) + "...";
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean " + shown;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer " + shown;
    case nlohmann::json::value_t::number_float: return "a floating-point number " + shown;
    case nlohmann::json::value_t::string: return "a string " + shown;
    case nlohmann::json::value_t::array: return "an array " + shown;
    default: return "an object " + shown;
  }
}

int64_t json_integer(const nlohmann::json& json, const std::filesystem::path& file,
                     const std::string& key) {
  const nlohmann::json& value = json.at(key);
  if (!value.is_number_integer()) {
    throw CheckpointError(
        str(file.string(), ": ", key, ": expected an integer, got ", describe_json(value)));
  }
  return value.get<int64_t>();
}

}  // namespace detail

struct HFConfig::Impl {
  nlohmann::json json = nlohmann::json::object();
  std::filesystem::path path;
  std::string prefix;                  // "rope_parameters." for a nested object
  mutable std::set<std::string> read;  // every key asked for, present or not

  // The value of `key`, or nullptr when absent.
  const nlohmann::json* find(const std::string& key) const {
    read.insert(key);
    auto it = json.find(key);
    return it == json.end() ? nullptr : &*it;
  }

  // The value of `key`, or nullptr when absent or null.
  const nlohmann::json* find_non_null(const std::string& key) const {
    const nlohmann::json* value = find(key);
    return value == nullptr || value->is_null() ? nullptr : value;
  }

  const nlohmann::json& require(const std::string& key) const {
    if (const nlohmann::json* value = find(key)) return *value;
    throw CheckpointError(str(path.string(), ": missing key '", prefix, key, "'"));
  }

  [[noreturn]] void wrong_type(const std::string& key, std::string_view expected,
                               const nlohmann::json& value) const {
    throw CheckpointError(str(path.string(), ": key '", prefix, key, "' must be ", expected,
                              ", found ", detail::describe_json(value)));
  }

  int64_t to_int(const std::string& key, const nlohmann::json& value) const {
    bool fits = value.is_number_integer() &&
                !(value.is_number_unsigned() &&
                  value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()));
    if (!fits) wrong_type(key, "an integer", value);
    return value.get<int64_t>();
  }

  double to_double(const std::string& key, const nlohmann::json& value) const {
    if (!value.is_number()) wrong_type(key, "a number", value);
    return value.get<double>();
  }

  bool to_bool(const std::string& key, const nlohmann::json& value) const {
    if (!value.is_boolean()) wrong_type(key, "a boolean", value);
    return value.get<bool>();
  }

  std::string to_string(const std::string& key, const nlohmann::json& value) const {
    if (!value.is_string()) wrong_type(key, "a string", value);
    return value.get<std::string>();
  }
};

HFConfig::HFConfig() : impl_(std::make_unique<Impl>()) {}
HFConfig::~HFConfig() = default;
HFConfig::HFConfig(HFConfig&&) noexcept = default;
HFConfig& HFConfig::operator=(HFConfig&&) noexcept = default;

HFConfig HFConfig::load(const std::filesystem::path& path) {
  return parse(detail::read_text_file(path), path);
}

HFConfig HFConfig::parse(const std::string& text, const std::filesystem::path& source) {
  HFConfig config;
  config.impl_->path = source;
  config.impl_->json = detail::parse_json_text(text, source);
  if (!config.impl_->json.is_object()) {
    throw CheckpointError(str(source.string(), ": the top level must be a JSON object, found ",
                              detail::describe_json(config.impl_->json)));
  }
  // Checked now so that a malformed config fails when loaded, not when first used.
  config.architectures();
  config.model_type();
  return config;
}

const std::filesystem::path& HFConfig::path() const { return impl_->path; }

std::vector<std::string> HFConfig::architectures() const {
  const nlohmann::json* value = impl_->find_non_null("architectures");
  if (value == nullptr) return {};
  bool valid = value->is_array() &&
               std::all_of(value->begin(), value->end(), [](auto& v) { return v.is_string(); });
  if (!valid) impl_->wrong_type("architectures", "an array of strings", *value);
  return value->get<std::vector<std::string>>();
}

std::string HFConfig::model_type() const { return get_string("model_type", ""); }

bool HFConfig::has(const std::string& key) const { return impl_->find(key) != nullptr; }

std::vector<std::string> HFConfig::keys() const {
  std::vector<std::string> keys;
  for (const auto& item : impl_->json.items()) keys.push_back(item.key());
  return keys;
}

bool HFConfig::was_read(const std::string& key) const { return impl_->read.count(key) > 0; }

bool HFConfig::holds_default(const std::string& key) const {
  const auto it = impl_->json.find(key);
  if (it == impl_->json.end() || it->is_null()) return true;
  if (it->is_boolean()) return !it->get<bool>();
  if (it->is_number()) return it->get<double>() == 0.0;
  return it->empty();  // "", [] and {}
}

void HFConfig::ignore(std::initializer_list<std::string_view> keys) const {
  for (std::string_view key : keys) impl_->read.emplace(key);
}

void HFConfig::require(bool ok, std::string_view what) const {
  if (!ok) throw ModelError(str(impl_->path.string(), ": ", what));
}

std::optional<HFConfig> HFConfig::get_object(const std::string& key) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_object()) impl_->wrong_type(key, "an object", *value);
  HFConfig object;
  object.impl_->json = *value;
  object.impl_->path = impl_->path;
  object.impl_->prefix = impl_->prefix + key + ".";
  return object;
}

namespace {

// Keys of HF's PretrainedConfig (and of the tools that write checkpoints) that never change
// what a model computes, by the reason they cannot:
constexpr std::string_view kHarmlessKeys[] = {
    // bookkeeping: where the checkpoint came from and what wrote it
    "_name_or_path", "_model_name_or_path", "_commit_hash", "transformers_version", "architectures",
    "model_type", "auto_map", "transformers.js_config", "is_llama_config", "finetuning_task",
    "task_specific_params", "tokenizer_class", "prefix", "id2label", "label2id",
    // the dtype of the stored weights (the job config's model.dtype decides the compute dtype)
    "dtype", "torch_dtype", "use_bfloat16",
    // what HF's forward() returns, not what it computes
    "output_attentions", "output_hidden_states", "return_dict", "use_return_dict", "torchscript",
    "output_past", "use_cache", "xla_device",
    // initialisation and training-only switches of HF's Python code
    "initializer_range", "initializer_factor", "gradient_checkpointing", "tf_legacy_loss",
    "chunk_size_feed_forward", "_attn_implementation", "_attn_implementation_autoset",
    "_attn_implementation_internal", "attn_implementation",
    // special token ids: tokenizer facts; the jobs read eos and pad themselves
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "unk_token_id", "mask_token_id",
    "cls_token_id", "decoder_start_token_id",
    // generation defaults of HF's generate(): a generate job's own keys decide instead
    "max_length", "min_length", "max_new_tokens", "min_new_tokens", "do_sample", "early_stopping",
    "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "epsilon_cutoff", "eta_cutoff", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "forced_decoder_ids", "renormalize_logits"};

// Switches of PretrainedConfig that change the model when set; at HF's default (false, null,
// empty) they change nothing, so a model that never reads them still computes the same.
// rope_interleaved: nanotron's exports carry it; HF's Llama never reads it, and only false means
// the rotation HF (and this model) applies.
constexpr std::string_view kSwitchKeys[] = {
    "is_decoder",   "add_cross_attention",         "is_encoder_decoder", "tie_encoder_decoder",
    "pruned_heads", "cross_attention_hidden_size", "problem_type",       "rope_interleaved"};

}  // namespace

bool harmless_config_key(const HFConfig& config, const std::string& key) {
  for (std::string_view known : kHarmlessKeys) {
    if (known == key) return true;
  }
  for (std::string_view known : kSwitchKeys) {
    if (known == key) return config.holds_default(key);
  }
  return false;
}

HFConfig HFConfig::sub_config(const std::string& key) const {
  std::optional<HFConfig> sub = get_object(key);
  if (!sub) {
    throw CheckpointError(
        str(impl_->path.string(), ": key '", impl_->prefix, key, "' (an object) is missing"));
  }
  sub->ignore({"model_type", "transformers_version", "initializer_range", "dtype"});
  return std::move(*sub);
}

void HFConfig::refuse_unread(std::string_view why) const {
  std::vector<std::string> unread;
  for (const std::string& key : keys()) {
    if (!was_read(key) && !harmless_config_key(*this, key)) {
      unread.push_back("'" + impl_->prefix + key + "'");
    }
  }
  if (!unread.empty()) {
    throw CheckpointError(
        str(impl_->path.string(), ": ", join(unread, ", "), " not supported (", why, ")"));
  }
}

double HFConfig::get_probability(const std::string& key, double fallback) const {
  const double p = get_double(key, fallback);
  if (!(p >= 0.0 && p < 1.0)) {
    throw CheckpointError(str(impl_->path.string(), ": key '", impl_->prefix, key, "' = ", p,
                              " is not a probability in [0, 1)"));
  }
  return p;
}

int64_t HFConfig::get_int(const std::string& key) const {
  return impl_->to_int(key, impl_->require(key));
}

int64_t HFConfig::get_int(const std::string& key, int64_t fallback) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  return value == nullptr ? fallback : impl_->to_int(key, *value);
}

double HFConfig::get_double(const std::string& key) const {
  return impl_->to_double(key, impl_->require(key));
}

double HFConfig::get_double(const std::string& key, double fallback) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  return value == nullptr ? fallback : impl_->to_double(key, *value);
}

bool HFConfig::get_bool(const std::string& key, bool fallback) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  return value == nullptr ? fallback : impl_->to_bool(key, *value);
}

std::string HFConfig::get_string(const std::string& key) const {
  return impl_->to_string(key, impl_->require(key));
}

std::string HFConfig::get_string(const std::string& key, const std::string& fallback) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  return value == nullptr ? fallback : impl_->to_string(key, *value);
}

std::optional<std::vector<std::string>> HFConfig::get_string_list(const std::string& key) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  if (value == nullptr) return std::nullopt;
  const bool valid = value->is_array() && std::all_of(value->begin(), value->end(),
                                                      [](const auto& v) { return v.is_string(); });
  if (!valid) impl_->wrong_type(key, "an array of strings", *value);
  return value->get<std::vector<std::string>>();
}

std::optional<std::vector<int64_t>> HFConfig::get_int_list(const std::string& key) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) impl_->wrong_type(key, "an array of integers", *value);
  std::vector<int64_t> list;
  for (const nlohmann::json& item : *value) list.push_back(impl_->to_int(key, item));
  return list;
}

std::array<int64_t, 2> HFConfig::get_int_pair(const std::string& key, int64_t fallback) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  if (value == nullptr) return {fallback, fallback};
  if (!value->is_array()) {
    const int64_t n = impl_->to_int(key, *value);
    return {n, n};
  }
  if (value->size() != 2) impl_->wrong_type(key, "an integer or a list of two", *value);
  return {impl_->to_int(key, (*value)[0]), impl_->to_int(key, (*value)[1])};
}

std::optional<int64_t> HFConfig::get_optional_int(const std::string& key) const {
  const nlohmann::json* value = impl_->find_non_null(key);
  if (value == nullptr) return std::nullopt;
  return impl_->to_int(key, *value);
}

std::optional<int64_t> HFConfig::pipeline_layers() const {
  if (get_bool("is_encoder_decoder", false)) {
    const std::optional<int64_t> encoder = get_optional_int("encoder_layers");
    if (encoder) {
      const std::optional<int64_t> decoder = get_optional_int("decoder_layers");
      return decoder ? std::optional<int64_t>(*encoder + *decoder) : std::nullopt;
    }
    const std::optional<int64_t> layers = get_optional_int("num_layers");
    if (!layers) return std::nullopt;
    return *layers + get_optional_int("num_decoder_layers").value_or(*layers);
  }
  if (const auto depths = get_int_list("depths")) {
    return std::accumulate(depths->begin(), depths->end(), int64_t{0});
  }
  return num_hidden_layers();
}

std::optional<int64_t> HFConfig::num_hidden_layers() const {
  for (const char* key : {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}) {
    if (auto layers = get_optional_int(key)) return layers;
  }
  return std::nullopt;
}

}  // namespace shardformer
