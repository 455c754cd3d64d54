// Internal state of a WordPieceTokenizer (what load_tokenizer_json.cpp and load_vocab_file.cpp
// read) and the pipeline stages shared by the tokenizer's source files.
#pragma once

#include "shardformer/tokenizer/wordpiece.h"
#include "unicode.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace shardformer::tokenizer::detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>>;
using TokenSet = std::unordered_set<std::string, StringHash, std::equal_to<>>;

// Finds added tokens in a text: at the leftmost position where any matches, the longest one.
class AddedTokenMatcher {
 public:
  void add(std::u32string pattern, int64_t id);
  bool empty() const { return patterns_.empty(); }
  // Calls on_text(piece) for each stretch between matches (never empty) and on_token(id) for
  // each match, in order.
  void split(std::u32string_view text, const std::function<void(std::u32string_view)>& on_text,
             const std::function<void(int64_t)>& on_token) const;

 private:
  std::vector<std::pair<std::u32string, int64_t>> patterns_;
  // Indices into patterns_ by first code point, longest pattern first.
  std::unordered_map<char32_t, std::vector<size_t>> by_first_;
};

// A word for WordPiece, and whether it is looked up whole instead (the slow tokenizer's
// never_split words).
struct Word {
  std::u32string text;
  bool whole = false;
};

struct TokenizerData {
  Format format = Format::kTokenizerJson;
  Flavor flavor = Flavor::kTokenizers;
  std::filesystem::path source;

  // Normalization and word splitting.
  NormalizerOptions normalizer;
  bool has_normalizer = true;     // tokenizer.json: normalizer is not null
  bool has_pre_tokenizer = true;  // tokenizer.json: pre_tokenizer is not null
  bool basic_tokenize = true;     // vocab.txt: do_basic_tokenize
  TokenSet never_split;           // vocab.txt: looked up whole, never normalized or split
  TokenSet basic_never_split;     // vocab.txt: never_split plus every special token

  // Vocabulary and added tokens.
  TokenMap vocab;                        // the WordPiece model's vocabulary
  std::vector<std::string> id_to_token;  // every id; "" where none
  std::vector<bool> id_assigned;         // whether a token has the id
  size_t num_ids = 0;                    // ids with a token
  TokenMap added_ids;                    // content -> id of every added token
  std::vector<AddedToken> added_tokens;
  AddedTokenMatcher raw_matcher;            // matched in the raw text
  AddedTokenMatcher normalized_matcher;     // matched in normalized text (tokenizer.json)
  std::unordered_set<int64_t> special_ids;  // skipped by decode(skip_special_tokens)

  // WordPiece model.
  std::string unk_token = "[UNK]";
  int64_t unk_id = 0;
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
  size_t max_token_bytes = 0;  // longest vocabulary entry, bounds the longest-match search

  // Post-processor: (id, type id) of the special tokens before and after the sequence.
  std::vector<std::pair<int64_t, int64_t>> prefix_tokens;
  std::vector<std::pair<int64_t, int64_t>> suffix_tokens;
  int64_t sequence_type_id = 0;
  int64_t cls_id = 0;
  int64_t sep_id = 0;
  int64_t pad_id = 0;
  int64_t pad_type_id = 0;

  std::optional<TruncationParams> truncation;
  std::optional<PaddingParams> padding;
  std::optional<size_t> model_max_length;
  Side truncation_side = Side::kRight;
  Side padding_side = Side::kRight;

  // Decoding: tokenizer.json's WordPiece decoder (or plain joining when it is null), or the
  // slow tokenizer's convert_tokens_to_string; then transformers' clean-up when enabled.
  bool has_decoder = true;
  std::string decoder_prefix = "##";
  bool decoder_cleanup = true;
  bool clean_up_tokenization_spaces = false;

  // Registers `token` under `id` in id_to_token (growing it as needed).
  void assign_id(const std::string& token, int64_t id);
  // The id of an added token or vocabulary entry, else `fallback`.
  int64_t token_to_id_or(std::string_view token, int64_t fallback = -1) const;
};

// Python's str.replace(from, to) in place.
void replace_all(std::string& text, std::string_view from, std::string_view to);
// transformers' clean_up_tokenization (no space before . ? ! , and contractions), which is also
// HF tokenizers' WordPiece decoder cleanup.
void clean_up_tokenization(std::string& text);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

TokenizerData load_tokenizer_json(const std::filesystem::path& path);
TokenizerData load_vocab_file(const std::filesystem::path& path);

// tokenizers' BertNormalizer.
std::u32string bert_normalize(const NormalizerOptions& options, std::u32string_view text);
// tokenizers' BertPreTokenizer: words at whitespace, each punctuation character a word.
void bert_pre_tokenize(std::u32string_view text, std::vector<Word>& words);
// The slow tokenizer's BasicTokenizer.tokenize (or, without do_basic_tokenize, its
// whitespace split) of one piece of text holding no added token.
void basic_tokenize(const TokenizerData& data, std::u32string_view text, std::vector<Word>& words);

}  // namespace shardformer::tokenizer::detail
