// Reads vocab.txt with the slow tokenizer's files beside it (tokenizer_config.json,
// special_tokens_map.json, added_tokens.json) as transformers' Python BertTokenizer does; keys
// that could change token ids are read or refused by name.
#include "json_node.h"

#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace shardformer::tokenizer::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A special token and where it was set, for messages.
struct SpecialTokenSpec {
  std::string content;
  std::string origin;  // "file: key", for messages
};

// The lines of a text file as Python's readlines() in text mode gives them: "\n", "\r\n" and
// "\r" all end a line.
std::vector<std::string> read_lines(const fs::path& path) {
  if (!fs::is_regular_file(path)) throw ConfigError(str(path.string(), ": file not found"));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (!in) throw ConfigError(str(path.string(), ": cannot read the file"));
  std::string text = buffer.str();
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// Settings of the slow tokenizer gathered from tokenizer_config.json and special_tokens_map.json.
struct SlowConfig {
  std::map<std::string, SpecialTokenSpec> named_specials;  // unk_token -> [UNK], ...
  std::vector<SpecialTokenSpec> extra_specials;
  std::optional<bool> strip_accents;
  std::vector<AddedToken> added;
  bool split_special_tokens = false;
};

constexpr std::array<std::string_view, 7> kNamedSpecials = {
    "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "bos_token", "eos_token"};
// BertTokenizer's special tokens when no file names them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kDefaultSpecials = {{
    {"unk_token", "[UNK]"},
    {"sep_token", "[SEP]"},
    {"pad_token", "[PAD]"},
    {"cls_token", "[CLS]"},
    {"mask_token", "[MASK]"},
}};

void set_named_special(SlowConfig& config, const Node& node, const std::string& key) {
  if (node.value.is_null()) return;
  std::string content = read_token_spec(node);
  std::string origin = str(node.file.string(), ": ", key);
  auto [it, inserted] = config.named_specials.try_emplace(key, SpecialTokenSpec{content, origin});
  if (!inserted && it->second.content != content) {
    node.fail(str("\"", content, "\" disagrees with ", it->second.origin, " = \"",
                  it->second.content, "\""));
  }
}

void read_extra_specials(SlowConfig& config, const Node& node) {
  if (node.value.is_null()) return;
  auto add = [&](const Node& item) {
    std::string content = read_token_spec(item);
    config.extra_specials.push_back({content, str(item.file.string(), ": ", item.where)});
  };
  if (node.value.is_array()) {
    for (size_t i = 0; i < node.value.size(); ++i) add(node.at(i));
  } else if (node.value.is_object()) {
    for (const auto& [key, unused] : node.value.items()) add(node[key]);
  } else {
    node.fail_type("an array or an object of tokens");
  }
}

void read_tokenizer_config(TokenizerData& data, SlowConfig& config, const fs::path& path) {
  json root_json = shardformer::detail::read_json_file(path);
  Node root{root_json, path, ""};
  root.only_keys({"do_lower_case", "do_basic_tokenize", "never_split", "tokenize_chinese_chars",
                  "strip_accents", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                  "bos_token", "eos_token", "additional_special_tokens", "extra_special_tokens",
                  "added_tokens_decoder", "model_max_length", "padding_side", "truncation_side",
                  "clean_up_tokenization_spaces", "split_special_tokens", "tokenizer_class",
                  // These cannot change token ids: naming, bookkeeping and model input names.
                  "name_or_path", "model_input_names", "special_tokens_map_file", "tokenizer_file",
                  "auto_map", "processor_class", "backend"});
  if (root.has("tokenizer_class")) {
    root["tokenizer_class"].one_of({"BertTokenizer", "BertTokenizerFast", "BertTokenizerLegacy",
                                    "DistilBertTokenizer", "DistilBertTokenizerFast",
                                    "ElectraTokenizer", "ElectraTokenizerFast",
                                    "MobileBertTokenizer", "MobileBertTokenizerFast",
                                    "SqueezeBertTokenizer", "SqueezeBertTokenizerFast"});
  }
  if (root.has("do_lower_case")) data.normalizer.lowercase = root["do_lower_case"].boolean();
  if (root.has("do_basic_tokenize")) data.basic_tokenize = root["do_basic_tokenize"].boolean();
  if (root.has("tokenize_chinese_chars")) {
    data.normalizer.handle_chinese_chars = root["tokenize_chinese_chars"].boolean();
  }
  config.strip_accents = root["strip_accents"].optional_boolean();
  if (root.has("never_split")) {
    Node list = root["never_split"];
    if (!list.value.is_array()) list.fail_type("an array of strings or null");
    for (size_t i = 0; i < list.value.size(); ++i) data.never_split.insert(list.at(i).string());
  }
  for (std::string_view key : kNamedSpecials) {
    set_named_special(config, root[key], std::string(key));
  }
  read_extra_specials(config, root["additional_special_tokens"]);
  read_extra_specials(config, root["extra_special_tokens"]);
  if (root.has("added_tokens_decoder")) {
    Node decoder = root["added_tokens_decoder"];
    decoder.object();
    for (const auto& [id_text, unused] : decoder.value.items()) {
      Node entry = decoder[id_text];
      entry.only_keys(
          {"__type", "content", "lstrip", "rstrip", "single_word", "normalized", "special"});
      AddedToken token;
      try {
        size_t used = 0;
        token.id = std::stoll(id_text, &used);
        if (used != id_text.size() || token.id < 0) throw std::invalid_argument(id_text);
      } catch (const std::exception&) {
        decoder.fail(str("key \"", id_text, "\" is not a token id"));
      }
      token.content = entry["content"].string();
      token.special = entry.has("special") && entry["special"].boolean();
      token.normalized = entry.has("normalized") ? entry["normalized"].boolean() : !token.special;
      if (entry.has("single_word") && entry["single_word"].boolean()) {
        entry["single_word"].fail("single_word added tokens are not supported");
      }
      config.added.push_back(std::move(token));
    }
  }
  if (root.has("model_max_length")) {
    data.model_max_length = read_model_max_length(root["model_max_length"]);
  }
  if (root.has("padding_side")) {
    data.padding_side = read_side(root["padding_side"], "right", "left");
  }
  if (root.has("truncation_side")) {
    data.truncation_side = read_side(root["truncation_side"], "right", "left");
  }
  if (root.has("clean_up_tokenization_spaces")) {
    data.clean_up_tokenization_spaces = root["clean_up_tokenization_spaces"].boolean();
  }
  if (root.has("split_special_tokens")) {
    config.split_special_tokens = root["split_special_tokens"].boolean();
  }
}

void read_special_tokens_map(SlowConfig& config, const fs::path& path) {
  json root_json = shardformer::detail::read_json_file(path);
  Node root{root_json, path, ""};
  root.only_keys({"unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "bos_token",
                  "eos_token", "additional_special_tokens"});
  for (std::string_view key : kNamedSpecials) {
    set_named_special(config, root[key], std::string(key));
  }
  read_extra_specials(config, root["additional_special_tokens"]);
}

void read_added_tokens_json(SlowConfig& config, const fs::path& path) {
  json root_json = shardformer::detail::read_json_file(path);
  Node root{root_json, path, ""};
  root.object();
  for (const auto& [content, unused] : root.value.items()) {
    config.added.push_back({content, static_cast<int64_t>(root[content].size()), false, true});
  }
}

}  // namespace

TokenizerData load_vocab_file(const fs::path& path) {
  TokenizerData data;
  data.format = Format::kVocabTxt;
  data.flavor = Flavor::kPython;
  data.source = path;
  data.clean_up_tokenization_spaces = true;
  std::vector<std::string> lines = read_lines(path);
  if (lines.empty()) throw ConfigError(str(path.string(), ": the vocabulary is empty"));
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      decode_utf8(lines[i], "token");
    } catch (const Error& e) {
      throw ConfigError(str(path.string(), ": line ", i + 1, ": ", e.what()));
    }
    add_vocab_entry(data, lines[i], static_cast<int64_t>(i));
  }

  SlowConfig config;
  fs::path folder = path.parent_path();
  if (fs::path file = folder / kTokenizerConfig; fs::is_regular_file(file)) {
    read_tokenizer_config(data, config, file);
  }
  if (fs::path file = folder / "special_tokens_map.json"; fs::is_regular_file(file)) {
    read_special_tokens_map(config, file);
  }
  if (fs::path file = folder / "added_tokens.json"; fs::is_regular_file(file)) {
    read_added_tokens_json(config, file);
  }
  data.normalizer.clean_text = true;
  data.normalizer.strip_accents = config.strip_accents.value_or(data.normalizer.lowercase);

  for (const auto& [key, fallback] : kDefaultSpecials) {
    config.named_specials.try_emplace(std::string(key),
                                      SpecialTokenSpec{std::string(fallback), "the default"});
  }
  // The four tokens every BERT input needs must be in the vocabulary itself.
  auto required = [&](const std::string& key) {
    const SpecialTokenSpec& spec = config.named_specials.at(key);
    auto it = data.vocab.find(spec.content);
    if (it == data.vocab.end()) {
      throw ConfigError(str(path.string(), ": \"", spec.content, "\" (", key, " from ", spec.origin,
                            ") is not in the vocabulary"));
    }
    return it->second;
  };
  data.unk_token = config.named_specials.at("unk_token").content;
  data.unk_id = required("unk_token");
  data.cls_id = required("cls_token");
  data.sep_id = required("sep_token");
  data.pad_id = required("pad_token");
  data.prefix_tokens = {{data.cls_id, 0}};
  data.suffix_tokens = {{data.sep_id, 0}};

  // Added tokens as from_pretrained registers them: the files' added tokens, then the special
  // tokens (one outside the vocabulary takes the next free id).
  static const json kNoValue;
  Node where{kNoValue, path, "added tokens"};
  for (AddedToken& token : config.added) {
    if (!token.special && token.normalized && data.normalizer.lowercase) {
      token.content =
          encode_utf8(lowercase(decode_utf8(token.content, "added token"), Flavor::kPython));
    }
    add_token(data, token, where);
  }
  std::vector<SpecialTokenSpec> specials;
  for (const auto& [key, spec] : config.named_specials) specials.push_back(spec);
  specials.insert(specials.end(), config.extra_specials.begin(), config.extra_specials.end());
  for (const SpecialTokenSpec& spec : specials) {
    int64_t id = data.token_to_id_or(spec.content);
    if (id < 0) id = static_cast<int64_t>(data.id_to_token.size());
    add_token(data, {spec.content, id, true, false}, where);
    data.basic_never_split.insert(spec.content);
  }
  data.basic_never_split.insert(data.never_split.begin(), data.never_split.end());
  if (config.split_special_tokens) {
    data.basic_never_split = data.never_split;
  } else {
    for (const AddedToken& token : data.added_tokens) {
      data.raw_matcher.add(decode_utf8(token.content, "added token"), token.id);
    }
  }
  return data;
}

}  // namespace shardformer::tokenizer::detail
