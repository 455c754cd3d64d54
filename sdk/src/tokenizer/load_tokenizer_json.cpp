// Reads HF tokenizers' tokenizer.json (WordPiece model, BertNormalizer, BertPreTokenizer,
// TemplateProcessing/BertProcessing, WordPiece decoder): every key is read or refused by name.
#include "json_node.h"

namespace shardformer::tokenizer::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void read_model(TokenizerData& data, const Node& model) {
  model.object();
  if (!model.has("type")) {
    model.fail("\"type\" is missing; only a WordPiece model is supported");
  }
  std::string type = model["type"].string();
  if (type != "WordPiece") {
    model["type"].fail(str("model type \"", type, "\" is not supported; only WordPiece is"));
  }
  model.only_keys(
      {"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
  if (model.has("unk_token")) data.unk_token = model["unk_token"].string();
  if (model.has("continuing_subword_prefix")) {
    data.continuing_subword_prefix = model["continuing_subword_prefix"].string();
  }
  if (model.has("max_input_chars_per_word")) {
    data.max_input_chars_per_word = model["max_input_chars_per_word"].size();
  }
  Node vocab = model["vocab"];
  vocab.object();
  for (const auto& [token, id_value] : vocab.value.items()) {
    Node id_node{id_value, model.file, vocab.child_path(token)};
    int64_t id = static_cast<int64_t>(id_node.size());
    if (id < static_cast<int64_t>(data.id_to_token.size()) && data.id_assigned[id]) {
      id_node.fail(
          str("id ", id, " is given to both \"", data.id_to_token[id], "\" and \"", token, "\""));
    }
    add_vocab_entry(data, token, id);
  }
  auto unk = data.vocab.find(data.unk_token);
  if (unk == data.vocab.end()) {
    model["vocab"].fail(str("the unknown token \"", data.unk_token,
                            "\" (model.unk_token) is not in the vocabulary"));
  }
  data.unk_id = unk->second;
}

void read_normalizer(TokenizerData& data, const Node& normalizer) {
  if (normalizer.value.is_null()) {
    data.has_normalizer = false;
    data.normalizer = {false, false, false, false};
    return;
  }
  normalizer.object();
  std::string type = normalizer["type"].string();
  if (type != "BertNormalizer") {
    normalizer["type"].fail(
        str("normalizer type \"", type, "\" is not supported; only BertNormalizer (or null) is"));
  }
  normalizer.only_keys(
      {"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"});
  // Missing options take BertNormalizer's defaults.
  NormalizerOptions& options = data.normalizer;
  if (normalizer.has("clean_text")) options.clean_text = normalizer["clean_text"].boolean();
  if (normalizer.has("handle_chinese_chars")) {
    options.handle_chinese_chars = normalizer["handle_chinese_chars"].boolean();
  }
  if (normalizer.has("lowercase")) options.lowercase = normalizer["lowercase"].boolean();
  options.strip_accents =
      normalizer["strip_accents"].optional_boolean().value_or(options.lowercase);
}

void read_pre_tokenizer(TokenizerData& data, const Node& pre_tokenizer) {
  if (pre_tokenizer.value.is_null()) {
    data.has_pre_tokenizer = false;
    return;
  }
  pre_tokenizer.object();
  std::string type = pre_tokenizer["type"].string();
  if (type != "BertPreTokenizer") {
    pre_tokenizer["type"].fail(str("pre-tokenizer type \"", type,
                                   "\" is not supported; only BertPreTokenizer (or null) is"));
  }
  pre_tokenizer.only_keys({"type"});
}

void read_added_tokens(TokenizerData& data, const Node& list) {
  if (list.value.is_null()) return;
  if (!list.value.is_array()) list.fail_type("an array");
  for (size_t i = 0; i < list.value.size(); ++i) {
    Node entry = list.at(i);
    entry.only_keys({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken token;
    token.id = static_cast<int64_t>(entry["id"].size());
    token.content = entry["content"].string();
    if (token.content.empty()) entry["content"].fail("an added token cannot be empty");
    token.special = entry.has("special") && entry["special"].boolean();
    token.normalized = entry.has("normalized") ? entry["normalized"].boolean() : !token.special;
    if (entry.has("single_word") && entry["single_word"].boolean()) {
      entry["single_word"].fail("single_word added tokens are not supported");
    }
    // lstrip/rstrip only move whitespace into the token's span; BertPreTokenizer drops that
    // whitespace anyway, so ids are the same. Without it they would matter: refuse.
    for (std::string_view key : {"lstrip", "rstrip"}) {
      if (entry.has(key) && entry[key].boolean() && !data.has_pre_tokenizer) {
        entry[key].fail("lstrip/rstrip added tokens need the BertPreTokenizer");
      }
    }
    std::u32string pattern = to_u32(token.content, entry["content"]);
    if (token.normalized) {
      if (data.has_normalizer) pattern = bert_normalize(data.normalizer, pattern);
      data.normalized_matcher.add(std::move(pattern), token.id);
    } else {
      data.raw_matcher.add(std::move(pattern), token.id);
    }
    add_token(data, std::move(token), entry);
  }
}

// The ids of a post-processor special token, looked up in tokenizer.json's own tables.
int64_t special_id(const TokenizerData& data, const std::string& token, const Node& node) {
  auto it = data.added_ids.find(token);
  if (it != data.added_ids.end()) return it->second;
  auto vocab_it = data.vocab.find(token);
  if (vocab_it == data.vocab.end()) node.fail(str("\"", token, "\" is not in the vocabulary"));
  return vocab_it->second;
}

void read_template(TokenizerData& data, const Node& processor) {
  processor.only_keys({"type", "single", "pair", "special_tokens"});
  Node specials = processor["special_tokens"];
  specials.object();
  Node single = processor["single"];
  if (!single.value.is_array()) single.fail_type("an array");
  // "pair" only applies to two-sequence inputs, which this tokenizer does not encode.
  if (!processor["pair"].value.is_array()) processor["pair"].fail_type("an array");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.value.size(); ++i) {
    Node item = single.at(i);
    item.object();
    if (item.value.size() != 1) item.fail("expected one key, SpecialToken or Sequence");
    if (item.has("Sequence")) {
      Node sequence = item["Sequence"];
      sequence.only_keys({"id", "type_id"});
      if (sequence["id"].string() != "A" || seen_sequence) {
        sequence.fail("the single template must hold the sequence A exactly once");
      }
      seen_sequence = true;
      data.sequence_type_id = static_cast<int64_t>(sequence["type_id"].size());
      continue;
    }
    Node special = item["SpecialToken"];
    if (special.value.is_null()) item.fail("expected one key, SpecialToken or Sequence");
    special.only_keys({"id", "type_id"});
    std::string name = special["id"].string();
    auto type_id = static_cast<int64_t>(special["type_id"].size());
    Node entry = specials[name];
    if (entry.value.is_null()) special["id"].fail(str("\"", name, "\" is not in special_tokens"));
    entry.only_keys({"id", "ids", "tokens"});
    Node ids = entry["ids"];
    if (!ids.value.is_array() || ids.value.empty()) ids.fail_type("a non-empty array of ids");
    auto& target = seen_sequence ? data.suffix_tokens : data.prefix_tokens;
    for (size_t k = 0; k < ids.value.size(); ++k) {
      int64_t id = static_cast<int64_t>(ids.at(k).size());
      if (id >= static_cast<int64_t>(data.id_to_token.size()) || !data.id_assigned[id]) {
        ids.at(k).fail(str("id ", id, " is not in the vocabulary"));
      }
      target.emplace_back(id, type_id);
    }
  }
  if (!seen_sequence) single.fail("the single template has no sequence $A");
}

void read_post_processor(TokenizerData& data, const Node& processor) {
  if (processor.value.is_null()) {
    processor.fail("is null; a BERT tokenizer needs a post-processor adding [CLS] and [SEP]");
  }
  processor.object();
  std::string type = processor["type"].string();
  if (type == "TemplateProcessing") {
    read_template(data, processor);
  } else if (type == "BertProcessing") {
    processor.only_keys({"type", "sep", "cls"});
    for (std::string_view key : {"cls", "sep"}) {
      Node pair = processor[key];
      if (!pair.value.is_array() || pair.value.size() != 2) pair.fail_type("[token, id]");
      std::string token = pair.at(0).string();
      auto id = static_cast<int64_t>(pair.at(1).size());
      if (special_id(data, token, pair.at(0)) != id) {
        pair.fail(str("\"", token, "\" has id ", special_id(data, token, pair.at(0)),
                      " in the vocabulary, not ", id));
      }
      (key == "cls" ? data.prefix_tokens : data.suffix_tokens).emplace_back(id, 0);
    }
  } else {
    processor["type"].fail(
        str("post-processor type \"", type,
            "\" is not supported; only TemplateProcessing and BertProcessing are"));
  }
  if (data.prefix_tokens.empty() || data.suffix_tokens.empty()) {
    processor.fail(
        "a BERT tokenizer needs special tokens before and after the sequence "
        "([CLS] ... [SEP])");
  }
  data.cls_id = data.prefix_tokens.front().first;
  data.sep_id = data.suffix_tokens.front().first;
}

void read_decoder(TokenizerData& data, const Node& decoder) {
  if (decoder.value.is_null()) {
    data.has_decoder = false;
    return;
  }
  decoder.object();
  std::string type = decoder["type"].string();
  if (type != "WordPiece") {
    decoder["type"].fail(
        str("decoder type \"", type, "\" is not supported; only WordPiece (or null) is"));
  }
  decoder.only_keys({"type", "prefix", "cleanup"});
  if (decoder.has("prefix")) data.decoder_prefix = decoder["prefix"].string();
  if (decoder.has("cleanup")) data.decoder_cleanup = decoder["cleanup"].boolean();
}

void read_truncation(TokenizerData& data, const Node& truncation) {
  if (truncation.value.is_null()) return;
  truncation.only_keys({"max_length", "strategy", "stride", "direction"});
  TruncationParams params;
  params.max_length = truncation["max_length"].size();
  // The strategies differ only for pairs of sequences; the stride only shapes overflowing
  // windows, which encode() does not return.
  if (truncation.has("strategy")) {
    truncation["strategy"].one_of({"LongestFirst", "OnlyFirst", "OnlySecond"});
  }
  if (truncation.has("stride")) truncation["stride"].size();
  if (truncation.has("direction")) {
    params.direction = read_side(truncation["direction"], "Right", "Left");
  }
  data.truncation = params;
  data.truncation_side = params.direction;
}

void read_padding(TokenizerData& data, const Node& padding) {
  if (padding.value.is_null()) return;
  padding.only_keys(
      {"strategy", "direction", "pad_to_multiple_of", "pad_id", "pad_type_id", "pad_token"});
  PaddingParams params;
  Node strategy = padding["strategy"];
  if (strategy.value.is_object()) {
    strategy.only_keys({"Fixed"});
    params.fixed_length = strategy["Fixed"].size();
  } else {
    strategy.one_of({"BatchLongest"});
  }
  if (padding.has("direction")) params.direction = read_side(padding["direction"], "Right", "Left");
  if (padding.has("pad_to_multiple_of")) {
    params.pad_to_multiple_of = padding["pad_to_multiple_of"].size();
  }
  params.pad_id = static_cast<int64_t>(padding["pad_id"].size());
  params.pad_type_id = static_cast<int64_t>(padding["pad_type_id"].size());
  params.pad_token = padding["pad_token"].string();
  if (data.token_to_id_or(params.pad_token) != params.pad_id) {
    padding["pad_id"].fail(str("pad_token \"", params.pad_token, "\" does not have id ",
                               params.pad_id, " in the vocabulary"));
  }
  data.padding = params;
  data.padding_side = params.direction;
  data.pad_id = params.pad_id;
  data.pad_type_id = params.pad_type_id;
}

// tokenizer_config.json beside tokenizer.json: the keys of it that transformers applies over
// tokenizer.json (its sides win over tokenizer.json's truncation and padding directions).
struct FastConfig {
  std::optional<size_t> model_max_length;
  std::optional<Side> padding_side;
  std::optional<Side> truncation_side;
  std::optional<bool> clean_up_tokenization_spaces;
  std::optional<std::string> pad_token;
  // transformers 5 rebuilds a BertTokenizer's normalizer from these: they must agree.
  std::optional<bool> do_lower_case;
  std::optional<bool> tokenize_chinese_chars;
  std::optional<std::optional<bool>> strip_accents;
  fs::path path;
};

FastConfig read_fast_config(const fs::path& folder) {
  FastConfig config;
  fs::path path = folder / kTokenizerConfig;
  if (!fs::is_regular_file(path)) return config;
  json root_json = shardformer::detail::read_json_file(path);
  Node root{root_json, path, ""};
  root.object();
  if (root.has("model_max_length")) {
    config.model_max_length = read_model_max_length(root["model_max_length"]);
  }
  if (root.has("padding_side")) {
    config.padding_side = read_side(root["padding_side"], "right", "left");
  }
  if (root.has("truncation_side")) {
    config.truncation_side = read_side(root["truncation_side"], "right", "left");
  }
  if (root.has("clean_up_tokenization_spaces")) {
    config.clean_up_tokenization_spaces = root["clean_up_tokenization_spaces"].boolean();
  }
  if (root.has("pad_token")) config.pad_token = read_token_spec(root["pad_token"]);
  if (root.has("do_lower_case")) config.do_lower_case = root["do_lower_case"].boolean();
  if (root.has("tokenize_chinese_chars")) {
    config.tokenize_chinese_chars = root["tokenize_chinese_chars"].boolean();
  }
  if (root.value.contains("strip_accents")) {
    config.strip_accents = root["strip_accents"].optional_boolean();
  }
  config.path = path;
  return config;
}

// Refuses a tokenizer_config.json whose normalization settings contradict tokenizer.json's.
void check_agreement(const TokenizerData& data, const FastConfig& config) {
  const NormalizerOptions& options = data.normalizer;
  auto refuse = [&](std::string_view key, bool theirs, std::string_view our_key, bool ours) {
    auto text = [](bool b) { return b ? "true" : "false"; };
    throw ConfigError(str(config.path.string(), ": ", key, " is ", text(theirs), " but ",
                          data.source.string(), " has ", our_key, " ", text(ours)));
  };
  if (config.do_lower_case && *config.do_lower_case != options.lowercase) {
    refuse("do_lower_case", *config.do_lower_case, "normalizer.lowercase", options.lowercase);
  }
  if (config.tokenize_chinese_chars &&
      *config.tokenize_chinese_chars != options.handle_chinese_chars) {
    refuse("tokenize_chinese_chars", *config.tokenize_chinese_chars,
           "normalizer.handle_chinese_chars", options.handle_chinese_chars);
  }
  if (config.strip_accents) {
    bool strip = config.strip_accents->value_or(config.do_lower_case.value_or(options.lowercase));
    if (strip != options.strip_accents) {
      refuse("strip_accents (null means do_lower_case)", strip,
             "normalizer.strip_accents (null means lowercase)", options.strip_accents);
    }
  }
}

}  // namespace

TokenizerData load_tokenizer_json(const fs::path& path) {
  json root_json = shardformer::detail::read_json_file(path);
  Node root{root_json, path, ""};
  root.only_keys({"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                  "model", "post_processor", "decoder"});
  TokenizerData data;
  data.format = Format::kTokenizerJson;
  data.flavor = Flavor::kTokenizers;
  data.source = path;
  if (root.has("version")) root["version"].string();
  if (!root.has("model")) root.fail("\"model\" is missing");
  read_model(data, root["model"]);
  read_normalizer(data, root["normalizer"]);
  read_pre_tokenizer(data, root["pre_tokenizer"]);
  read_added_tokens(data, root["added_tokens"]);
  read_post_processor(data, root["post_processor"]);
  read_decoder(data, root["decoder"]);
  read_truncation(data, root["truncation"]);
  read_padding(data, root["padding"]);
  FastConfig config = read_fast_config(path.parent_path());
  if (data.has_normalizer) check_agreement(data, config);
  data.model_max_length = config.model_max_length;
  data.padding_side = config.padding_side.value_or(data.padding_side);
  data.truncation_side = config.truncation_side.value_or(data.truncation_side);
  data.clean_up_tokenization_spaces = config.clean_up_tokenization_spaces.value_or(false);
  if (!data.padding) {
    std::string pad_token = config.pad_token.value_or("[PAD]");
    data.pad_id = data.token_to_id_or(pad_token);
    if (data.pad_id < 0) {
      throw ConfigError(str(path.string(), ": the padding token \"", pad_token,
                            "\" is not in the vocabulary and \"padding\" names none"));
    }
  }
  return data;
}

}  // namespace shardformer::tokenizer::detail
