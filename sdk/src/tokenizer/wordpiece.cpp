// WordPieceTokenizer: the encode pipeline (added tokens, words, greedy longest-match WordPiece,
// [CLS] ... [SEP] and truncation), batch padding, decoding and the accessors.
#include "shardformer/tokenizer/wordpiece.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "tokenizer_data.h"

#include <algorithm>
#include <array>

namespace shardformer::tokenizer {
namespace {

namespace fs = std::filesystem;
using detail::Flavor;
using detail::TokenizerData;
using detail::Word;

// Splits one word into vocabulary pieces: at each position the longest entry that matches
// (with the continuation prefix after the first piece); [UNK] for the whole word when a
// position matches nothing or the word is too long.
class WordPiece {
 public:
  explicit WordPiece(const TokenizerData& data) : data_(data) {}

  void tokenize(const Word& word, std::vector<int64_t>& ids) {
    if (word.text.size() > data_.max_input_chars_per_word) {
      ids.push_back(data_.unk_id);
      return;
    }
    bytes_.clear();
    offsets_.clear();
    for (char32_t cp : word.text) {
      offsets_.push_back(bytes_.size());
      detail::append_utf8(cp, bytes_);
    }
    offsets_.push_back(bytes_.size());
    if (word.whole) {
      ids.push_back(data_.token_to_id_or(bytes_, data_.unk_id));
      return;
    }
    const size_t first_piece = ids.size();
    const size_t chars = word.text.size();
    size_t start = 0;
    while (start < chars) {
      // No vocabulary entry is longer than max_token_bytes: skip ends beyond it.
      auto limit = std::upper_bound(offsets_.begin() + static_cast<std::ptrdiff_t>(start),
                                    offsets_.end(), offsets_[start] + data_.max_token_bytes);
      size_t end = static_cast<size_t>(limit - offsets_.begin()) - 1;
      bool found = false;
      for (; end > start; --end) {
        std::string_view piece(bytes_.data() + offsets_[start], offsets_[end] - offsets_[start]);
        if (start > 0) {
          key_.assign(data_.continuing_subword_prefix);
          key_.append(piece);
          piece = key_;
        }
        if (auto it = data_.vocab.find(piece); it != data_.vocab.end()) {
          ids.push_back(it->second);
          found = true;
          break;
        }
      }
      if (!found) {
        ids.resize(first_piece);
        ids.push_back(data_.unk_id);
        return;
      }
      start = end;
    }
  }

 private:
  const TokenizerData& data_;
  std::string bytes_;
  std::vector<size_t> offsets_;
  std::string key_;
};

// The ids of `text` before special tokens are added.
std::vector<int64_t> encode_text(const TokenizerData& data, std::string_view text) {
  std::u32string code_points = detail::decode_utf8(text, "WordPieceTokenizer: the text");
  std::vector<int64_t> ids;
  std::vector<Word> words;
  WordPiece wordpiece(data);
  auto flush_words = [&] {
    for (const Word& word : words) wordpiece.tokenize(word, ids);
    words.clear();
  };
  auto push_token = [&](int64_t id) { ids.push_back(id); };
  auto pre_tokenize = [&](std::u32string_view piece) {
    if (data.has_pre_tokenizer) {
      detail::bert_pre_tokenize(piece, words);
    } else if (!piece.empty()) {
      words.push_back({std::u32string(piece), false});
    }
    flush_words();
  };
  auto on_piece = [&](std::u32string_view piece) {
    if (data.flavor == Flavor::kPython) {
      detail::basic_tokenize(data, piece, words);
      flush_words();
      return;
    }
    std::u32string normalized = data.has_normalizer ? detail::bert_normalize(data.normalizer, piece)
                                                    : std::u32string(piece);
    if (data.normalized_matcher.empty()) {
      pre_tokenize(normalized);
    } else {
      data.normalized_matcher.split(normalized, pre_tokenize, push_token);
    }
  };
  data.raw_matcher.split(code_points, on_piece, push_token);
  return ids;
}

Encoding post_process(const TokenizerData& data, std::vector<int64_t> ids, bool add_special_tokens,
                      std::optional<size_t> max_length) {
  const size_t specials =
      add_special_tokens ? data.prefix_tokens.size() + data.suffix_tokens.size() : 0;
  if (max_length) {
    if (*max_length < specials) {
      throw Error(str("WordPieceTokenizer: max_length ", *max_length, " leaves no room for the ",
                      specials, " special tokens"));
    }
    size_t keep = *max_length - specials;
    if (ids.size() > keep) {
      if (data.truncation_side == Side::kRight) {
        ids.resize(keep);
      } else {
        ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
      }
    }
  }
  Encoding encoding;
  if (!add_special_tokens) {
    encoding.type_ids.assign(ids.size(), data.sequence_type_id);
    encoding.ids = std::move(ids);
    return encoding;
  }
  encoding.ids.reserve(ids.size() + specials);
  encoding.type_ids.reserve(ids.size() + specials);
  for (const auto& [id, type_id] : data.prefix_tokens) {
    encoding.ids.push_back(id);
    encoding.type_ids.push_back(type_id);
  }
  encoding.ids.insert(encoding.ids.end(), ids.begin(), ids.end());
  encoding.type_ids.insert(encoding.type_ids.end(), ids.size(), data.sequence_type_id);
  for (const auto& [id, type_id] : data.suffix_tokens) {
    encoding.ids.push_back(id);
    encoding.type_ids.push_back(type_id);
  }
  return encoding;
}

// Python's str.strip(): drops leading and trailing str.isspace() characters.
std::string python_strip(const std::string& text) {
  std::u32string cps = detail::decode_utf8(text, "decoded text");
  auto space = [](char32_t cp) { return detail::is_split_space(cp, Flavor::kPython); };
  auto first = std::find_if_not(cps.begin(), cps.end(), space);
  auto last = std::find_if_not(cps.rbegin(), cps.rend(), space).base();
  return first < last ? detail::encode_utf8(std::u32string_view(&*first, last - first)) : "";
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(std::shared_ptr<const TokenizerData> data)
    : data_(std::move(data)) {}

WordPieceTokenizer WordPieceTokenizer::from_file(const fs::path& path) {
  if (fs::is_directory(path)) {
    if (fs::is_regular_file(path / "tokenizer.json"))
      return from_tokenizer_json(path / "tokenizer.json");
    if (fs::is_regular_file(path / "vocab.txt")) return from_vocab_file(path / "vocab.txt");
    throw ConfigError(
        str(path.string(), ": the folder holds neither tokenizer.json nor vocab.txt"));
  }
  if (!fs::exists(path)) throw ConfigError(str(path.string(), ": file not found"));
  if (path.extension() == ".json") return from_tokenizer_json(path);
  return from_vocab_file(path);
}

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const fs::path& path) {
  return WordPieceTokenizer(
      std::make_shared<const TokenizerData>(detail::load_tokenizer_json(path)));
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const fs::path& path) {
  return WordPieceTokenizer(std::make_shared<const TokenizerData>(detail::load_vocab_file(path)));
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text, bool add_special_tokens,
                                                std::optional<size_t> max_length) const {
  return encode_with_type_ids(text, add_special_tokens, max_length).ids;
}

Encoding WordPieceTokenizer::encode_with_type_ids(std::string_view text, bool add_special_tokens,
                                                  std::optional<size_t> max_length) const {
  return post_process(*data_, encode_text(*data_, text), add_special_tokens, max_length);
}

BatchEncoding WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts,
                                               const BatchOptions& options) const {
  if (options.pad_to_max_length && !options.max_length) {
    throw Error("WordPieceTokenizer::encode_batch: pad_to_max_length needs a max_length");
  }
  if (options.pad_to_multiple_of && *options.pad_to_multiple_of == 0) {
    throw Error("WordPieceTokenizer::encode_batch: pad_to_multiple_of must be positive");
  }
  std::vector<Encoding> rows;
  rows.reserve(texts.size());
  size_t width = 0;
  for (const std::string& text : texts) {
    rows.push_back(encode_with_type_ids(text, options.add_special_tokens, options.max_length));
    width = std::max(width, rows.back().ids.size());
  }
  if (options.pad_to_max_length) width = *options.max_length;
  if (options.pad_to_multiple_of) {
    size_t multiple = *options.pad_to_multiple_of;
    width = (width + multiple - 1) / multiple * multiple;
  }
  BatchEncoding batch;
  for (Encoding& row : rows) {
    const size_t length = row.ids.size();
    const size_t padding = width - length;
    std::vector<int64_t> mask(length, 1);
    auto at = [&](std::vector<int64_t>& v) {
      return data_->padding_side == Side::kRight ? v.end() : v.begin();
    };
    row.ids.insert(at(row.ids), padding, data_->pad_id);
    row.type_ids.insert(at(row.type_ids), padding, data_->pad_type_id);
    mask.insert(at(mask), padding, 0);
    batch.input_ids.push_back(std::move(row.ids));
    batch.token_type_ids.push_back(std::move(row.type_ids));
    batch.attention_mask.push_back(std::move(mask));
  }
  return batch;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for (int64_t id : encode_text(*data_, text)) tokens.push_back(id_to_token(id));
  return tokens;
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids,
                                       bool skip_special_tokens) const {
  const TokenizerData& data = *data_;
  std::vector<std::string> tokens;
  for (int64_t id : ids) {
    const std::string& token = id_to_token(id);
    if (!skip_special_tokens || !data.special_ids.contains(id)) tokens.push_back(token);
  }
  std::string text;
  if (data.flavor == Flavor::kPython) {
    text = join(tokens, " ");
    detail::replace_all(text, " ##", "");
    text = python_strip(text);
  } else if (!data.has_decoder) {
    text = join(tokens, " ");
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string token = tokens[i];
      if (i != 0) {
        if (token.starts_with(data.decoder_prefix)) {
          token.erase(0, data.decoder_prefix.size());
        } else {
          token.insert(0, " ");
        }
      }
      if (data.decoder_cleanup) detail::clean_up_tokenization(token);
      text += token;
    }
  }
  if (data.clean_up_tokenization_spaces) detail::clean_up_tokenization(text);
  return text;
}

std::optional<int64_t> WordPieceTokenizer::token_to_id(std::string_view token) const {
  int64_t id = data_->token_to_id_or(token);
  return id < 0 ? std::nullopt : std::optional<int64_t>(id);
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(data_->id_to_token.size()) ||
      !data_->id_assigned[static_cast<size_t>(id)]) {
    throw Error(str(data_->source.string(), ": token id ", id, " is not in the vocabulary (",
                    data_->id_to_token.size(), " ids)"));
  }
  return data_->id_to_token[static_cast<size_t>(id)];
}

int64_t WordPieceTokenizer::pad_id() const { return data_->pad_id; }
int64_t WordPieceTokenizer::cls_id() const { return data_->cls_id; }
int64_t WordPieceTokenizer::sep_id() const { return data_->sep_id; }
int64_t WordPieceTokenizer::unk_id() const { return data_->unk_id; }
size_t WordPieceTokenizer::vocab_size() const { return data_->num_ids; }
size_t WordPieceTokenizer::num_special_tokens() const {
  return data_->prefix_tokens.size() + data_->suffix_tokens.size();
}
Format WordPieceTokenizer::format() const { return data_->format; }
const fs::path& WordPieceTokenizer::source() const { return data_->source; }
const NormalizerOptions& WordPieceTokenizer::normalizer_options() const {
  return data_->normalizer;
}
const std::vector<AddedToken>& WordPieceTokenizer::added_tokens() const {
  return data_->added_tokens;
}
size_t WordPieceTokenizer::max_input_chars_per_word() const {
  return data_->max_input_chars_per_word;
}
const std::optional<TruncationParams>& WordPieceTokenizer::truncation() const {
  return data_->truncation;
}
const std::optional<PaddingParams>& WordPieceTokenizer::padding() const { return data_->padding; }
std::optional<size_t> WordPieceTokenizer::model_max_length() const {
  return data_->model_max_length;
}
Side WordPieceTokenizer::truncation_side() const { return data_->truncation_side; }
Side WordPieceTokenizer::padding_side() const { return data_->padding_side; }

}  // namespace shardformer::tokenizer
