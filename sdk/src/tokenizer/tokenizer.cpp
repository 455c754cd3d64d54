// Tokenizer: loads tokenizer.json (and tokenizer_config.json) into the pipeline stages and runs
// them: added tokens split off, normalize, pre-tokenize, model, post-process; and decode.
#include "shardformer/tokenizer/tokenizer.h"

#include "pipeline.h"
#include "shardformer/tokenizer/wordpiece.h"
#include "tokenizer_data.h"
#include "unicode.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

namespace shardformer::tokenizer {
namespace detail {

namespace fs = std::filesystem;

struct AddedEntry {
  std::string content;  // matched as written, or normalized when `normalized`
  int64_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// A stretch of text, or an added token's id.
struct Segment {
  std::string text;
  std::optional<int64_t> id;
  bool at_start = false;
};

// Added tokens found in text: at the leftmost position where any matches, the longest, with
// lstrip / rstrip taking the whitespace beside it, as HF's AddedVocabulary.
class AddedMatcher {
 public:
  void add(const AddedEntry& entry) {
    if (entry.content.empty()) return;
    by_first_byte_[static_cast<uint8_t>(entry.content[0])].push_back(entries_.size());
    entries_.push_back(entry);
  }
  void sort_longest_first() {
    for (auto& list : by_first_byte_) {
      std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
        return entries_[a].content.size() > entries_[b].content.size();
      });
    }
  }
  void split(const Segment& in, std::vector<Segment>& out) const {
    const std::string_view text = in.text;
    size_t emitted = 0;  // text before this is in `out`
    size_t pos = 0;
    while (pos < text.size()) {
      const AddedEntry* found = nullptr;
      for (size_t index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
        if (text.substr(pos).starts_with(entries_[index].content)) {
          found = &entries_[index];
          break;
        }
      }
      if (found == nullptr) {
        next_char(text, pos);
        continue;
      }
      size_t begin = pos;
      size_t end = pos + found->content.size();
      if (found->lstrip) begin = strip_left(text, begin, emitted);
      if (found->rstrip) end = strip_right(text, end);
      if (begin > emitted) {
        out.push_back({std::string(text.substr(emitted, begin - emitted)), std::nullopt,
                       in.at_start && emitted == 0});
      }
      out.push_back({"", found->id, false});
      emitted = pos = end;
    }
    if (emitted < text.size()) {
      out.push_back({std::string(text.substr(emitted)), std::nullopt, in.at_start && emitted == 0});
    }
  }
  bool empty() const { return entries_.empty(); }

 private:
  static bool is_space_at(std::string_view text, size_t pos) {
    return is_split_space(next_char(text, pos), Flavor::kTokenizers);
  }
  static size_t strip_left(std::string_view text, size_t begin, size_t floor) {
    while (begin > floor) {
      size_t start = begin - 1;
      while (start > floor && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
      if (!is_space_at(text, start)) break;
      begin = start;
    }
    return begin;
  }
  static size_t strip_right(std::string_view text, size_t end) {
    while (end < text.size()) {
      size_t next = end;
      if (!is_split_space(next_char(text, next), Flavor::kTokenizers)) break;
      end = next;
    }
    return end;
  }

  std::vector<AddedEntry> entries_;
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

struct PipelineData {
  fs::path source;
  std::optional<WordPieceTokenizer> wordpiece;  // BERT's pipeline, served by its own class
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<TokenModel> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedMatcher raw_added;         // matched in the text as given
  AddedMatcher normalized_added;  // matched in normalized text
  std::unordered_map<int64_t, AddedEntry> added_by_id;
  TokenMap added_ids;
  bool clean_up = false;
  TokenizerConfig config;

  std::optional<int64_t> token_to_id(std::string_view token) const {
    if (auto it = added_ids.find(token); it != added_ids.end()) return it->second;
    return model->token_to_id(token);
  }
};

namespace {

void read_pipeline_added_tokens(PipelineData& data, const Node& list) {
  if (list.value.is_null()) return;
  if (!list.value.is_array()) list.fail_type("an array");
  for (size_t i = 0; i < list.value.size(); ++i) {
    const Node entry = list.at(i);
    entry.only_keys({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedEntry token;
    token.id = static_cast<int64_t>(entry["id"].size());
    token.content = entry["content"].string();
    to_u32(token.content, entry["content"]);  // valid UTF-8
    if (token.content.empty()) entry["content"].fail("an added token cannot be empty");
    token.special = entry.has("special") && entry["special"].boolean();
    token.lstrip = entry.has("lstrip") && entry["lstrip"].boolean();
    token.rstrip = entry.has("rstrip") && entry["rstrip"].boolean();
    const bool normalized =
        entry.has("normalized") ? entry["normalized"].boolean() : !token.special;
    if (entry.has("single_word") && entry["single_word"].boolean()) {
      entry["single_word"].fail("single_word added tokens are not supported");
    }
    if (auto known = data.model->token_to_id(token.content); known && *known != token.id) {
      entry["id"].fail(str("\"", token.content, "\" has id ", *known, " in the vocabulary"));
    }
    data.added_ids.insert_or_assign(token.content, token.id);
    data.added_by_id.insert_or_assign(token.id, token);
    if (normalized && data.normalizer) {
      AddedEntry pattern = token;
      data.normalizer->normalize(pattern.content);
      data.normalized_added.add(pattern);
    } else if (normalized) {
      data.normalized_added.add(token);
    } else {
      data.raw_added.add(token);
    }
  }
  data.raw_added.sort_longest_first();
  data.normalized_added.sort_longest_first();
}

std::optional<std::string> optional_token(const Node& config, std::string_view key) {
  if (!config.has(key)) return std::nullopt;
  return read_token_spec(config[key]);
}

// tokenizer_config.json: the special tokens, the chat template, what changes ids
// (add_bos_token / add_eos_token rebuild the post-processor, as transformers does) or text
// (clean_up_tokenization_spaces); keys that change neither are listed, anything else refused.
void read_pipeline_tokenizer_config(PipelineData& data, const fs::path& folder) {
  const fs::path path = folder / kTokenizerConfig;
  const fs::path jinja = folder / "chat_template.jinja";
  TokenizerConfig& config = data.config;
  if (fs::exists(path)) {
    const nlohmann::json json = shardformer::detail::read_json_file(path);
    const Node root{json, path, ""};
    root.only_keys(
        {// special tokens: names for ids the tokenizer has
         "bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token",
         "additional_special_tokens", "extra_special_tokens", "added_tokens_decoder",
         // what changes ids or text, read below
         "add_bos_token", "add_eos_token", "clean_up_tokenization_spaces", "chat_template",
         "split_special_tokens",
         // bookkeeping and batching options that change no id of one text
         "tokenizer_class", "backend", "is_local", "local_files_only", "model_max_length",
         "padding_side", "truncation_side", "model_input_names", "name_or_path", "auto_map",
         "processor_class", "errors", "legacy", "use_default_system_prompt",
         "spaces_between_special_tokens", "add_prefix_space", "sp_model_kwargs", "use_fast",
         "max_length", "stride", "pad_to_multiple_of", "pad_token_type_id", "truncation_strategy",
         "fix_mistral_regex", "vocab_file", "merges_file", "tokenizer_file",
         // the slow tokenizer's options, which tokenizer.json's pipeline encodes
         "do_lower_case", "keep_accents", "remove_space", "extra_ids"});
    config.bos_token = optional_token(root, "bos_token");
    config.eos_token = optional_token(root, "eos_token");
    config.pad_token = optional_token(root, "pad_token");
    config.unk_token = optional_token(root, "unk_token");
    if (root.has("split_special_tokens") && root["split_special_tokens"].boolean()) {
      root["split_special_tokens"].fail("true (special tokens encoded as text) is not supported");
    }
    if (root.has("clean_up_tokenization_spaces")) {
      data.clean_up = root["clean_up_tokenization_spaces"].boolean();
    }
    const bool add_bos = root.has("add_bos_token") && root["add_bos_token"].boolean();
    const bool add_eos = root.has("add_eos_token") && root["add_eos_token"].boolean();
    if (root.has("add_bos_token") || root.has("add_eos_token")) {
      std::vector<int64_t> before;
      std::vector<int64_t> after;
      const auto id_of = [&](const std::optional<std::string>& token, std::string_view key) {
        if (!token) root[key].fail("is true but no such token is named");
        const auto id = data.token_to_id(*token);
        if (!id) root[key].fail(str("\"", *token, "\" is not in the vocabulary"));
        return *id;
      };
      if (add_bos) before.push_back(id_of(config.bos_token, "add_bos_token"));
      if (add_eos) after.push_back(id_of(config.eos_token, "add_eos_token"));
      nlohmann::json processor = {{"type", "TemplateProcessing"},
                                  {"single", nlohmann::json::array()},
                                  {"pair", nlohmann::json::array()},
                                  {"special_tokens", nlohmann::json::object()}};
      const auto add_special = [&](int64_t id) {
        const std::string name = str("id", id);
        processor["single"].push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
        processor["special_tokens"][name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
      };
      for (int64_t id : before) add_special(id);
      processor["single"].push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
      for (int64_t id : after) add_special(id);
      data.post_processor =
          make_post_processor(Node{processor, path, "add_bos_token/add_eos_token"},
                              [&](std::string_view t) { return data.token_to_id(t); });
    }
    if (root.has("chat_template")) {
      const Node t = root["chat_template"];
      if (t.value.is_string()) {
        config.chat_template = t.string();
      } else if (t.value.is_array()) {
        for (size_t i = 0; i < t.value.size(); ++i) {
          const Node entry = t.at(i);
          entry.only_keys({"name", "template"});
          if (entry["name"].string() == "default")
            config.chat_template = entry["template"].string();
        }
        if (!config.chat_template) t.fail("no template named \"default\"");
      } else {
        t.fail_type("a string or a list of {name, template}");
      }
      config.chat_template_source = path;
    }
  }
  if (!config.chat_template && fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw ConfigError(str(jinja.string(), ": cannot read the chat template"));
    config.chat_template = text.str();
    config.chat_template_source = jinja;
  }
}

}  // namespace
}  // namespace detail

using detail::Node;
using detail::PipelineData;
using detail::Segment;

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const fs::path file = fs::is_directory(path) ? path / "tokenizer.json" : path;
  if (!fs::exists(file)) {
    throw ConfigError(str(file.string(), ": no such file (a tokenizer.json is needed)"));
  }
  auto data = std::make_shared<PipelineData>();
  data->source = file;
  const nlohmann::json json = shardformer::detail::read_json_file(file);
  const Node root{json, file, ""};
  root.only_keys({"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                  "model", "post_processor", "decoder"});
  root["model"].object();
  if (root["model"]["type"].string() == "WordPiece") {
    data->wordpiece = WordPieceTokenizer::from_tokenizer_json(file);
  } else {
    // truncation and padding apply to batches only when asked (transformers ignores them too).
    data->normalizer = detail::make_normalizer(root["normalizer"]);
    data->pre_tokenizer = detail::make_pre_tokenizer(root["pre_tokenizer"]);
    data->model = detail::make_model(root["model"]);
    detail::read_pipeline_added_tokens(*data, root["added_tokens"]);
    data->post_processor = detail::make_post_processor(
        root["post_processor"], [&](std::string_view t) { return data->token_to_id(t); });
    data->decoder = detail::make_decoder(root["decoder"]);
  }
  detail::read_pipeline_tokenizer_config(*data, file.parent_path());
  // WordPieceTokenizer applies its own clean-up; transformers skips it for BPE models.
  if (data->wordpiece || root["model"]["type"].string() == "BPE") data->clean_up = false;
  return Tokenizer(std::move(data));
}

Tokenizer::Tokenizer(std::shared_ptr<const PipelineData> data) : data_(std::move(data)) {}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const PipelineData& d = *data_;
  if (d.wordpiece) return d.wordpiece->encode(text, add_special_tokens);
  detail::decode_utf8(text, "text to encode");  // throws naming the offset of invalid UTF-8
  std::vector<Segment> raw;
  d.raw_added.split(Segment{std::string(text), std::nullopt, true}, raw);
  std::vector<int64_t> ids;
  std::vector<Segment> normalized;
  std::vector<detail::Piece> pieces;
  for (Segment& segment : raw) {
    if (segment.id) {
      ids.push_back(*segment.id);
      continue;
    }
    if (d.normalizer) d.normalizer->normalize(segment.text);
    normalized.clear();
    d.normalized_added.split(segment, normalized);
    for (Segment& part : normalized) {
      if (part.id) {
        ids.push_back(*part.id);
        continue;
      }
      pieces.clear();
      pieces.push_back({std::move(part.text), part.at_start});
      if (d.pre_tokenizer) d.pre_tokenizer->split(pieces);
      for (const detail::Piece& piece : pieces) d.model->tokenize(piece.text, ids);
    }
  }
  if (add_special_tokens && d.post_processor) d.post_processor->process(ids);
  return ids;
}

std::string Tokenizer::normalize(std::string_view text) const {
  const std::u32string chars = detail::decode_utf8(text, "text to normalize");
  if (data_->wordpiece) {
    return detail::encode_utf8(
        detail::bert_normalize(data_->wordpiece->normalizer_options(), chars));
  }
  std::string out(text);
  if (data_->normalizer) data_->normalizer->normalize(out);
  return out;
}

std::string Tokenizer::decode(std::span<const int64_t> ids, bool skip_special_tokens) const {
  const PipelineData& d = *data_;
  if (d.wordpiece) {
    return d.wordpiece->decode(std::vector<int64_t>(ids.begin(), ids.end()), skip_special_tokens);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    if (auto it = d.added_by_id.find(id); it != d.added_by_id.end()) {
      if (!(skip_special_tokens && it->second.special)) tokens.push_back(it->second.content);
      continue;
    }
    const std::string* token = d.model->id_to_token(id);
    if (token == nullptr)
      throw Error(str("decode: no token has id ", id, " (", d.source.string(), ")"));
    tokens.push_back(*token);
  }
  std::string text;
  if (d.decoder) {
    d.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  if (d.clean_up) detail::clean_up_tokenization(text);
  return text;
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (data_->wordpiece) return data_->wordpiece->token_to_id(token);
  return data_->token_to_id(token);
}

std::string Tokenizer::id_to_token(int64_t id) const {
  if (data_->wordpiece) return data_->wordpiece->id_to_token(id);
  if (auto it = data_->added_by_id.find(id); it != data_->added_by_id.end()) {
    return it->second.content;
  }
  const std::string* token = data_->model->id_to_token(id);
  if (token == nullptr) throw Error(str("no token has id ", id, " (", data_->source.string(), ")"));
  return *token;
}

bool Tokenizer::is_special(int64_t id) const {
  if (data_->wordpiece) {
    for (const AddedToken& t : data_->wordpiece->added_tokens()) {
      if (t.id == id) return t.special;
    }
    return false;
  }
  auto it = data_->added_by_id.find(id);
  return it != data_->added_by_id.end() && it->second.special;
}

size_t Tokenizer::vocab_size() const {
  if (data_->wordpiece) return data_->wordpiece->vocab_size();
  size_t extra = 0;
  for (const auto& [id, entry] : data_->added_by_id) {
    if (data_->model->id_to_token(id) == nullptr) ++extra;
  }
  return data_->model->vocab_size() + extra;
}

const TokenizerConfig& Tokenizer::config() const { return data_->config; }
const std::filesystem::path& Tokenizer::source() const { return data_->source; }

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string DecodeStream::step(int64_t id) {
  ids_.push_back(id);
  const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || text.ends_with("\xEF\xBF\xBD")) return "";
  if (!text.starts_with(prefix_)) {
    throw Error("DecodeStream: the decoded text no longer starts with its earlier text");
  }
  std::string fresh = text.substr(prefix_.size());
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_->decode(ids_, skip_special_tokens_);
  prefix_index_ = new_prefix_index;
  return fresh;
}

}  // namespace shardformer::tokenizer
