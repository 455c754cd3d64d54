// The stages of HF tokenizers' pipeline as tokenizer.json names them (normalizer, pre-tokenizer,
// model, post-processor, decoder), each built from its JSON node by a make_* function that
// reads every key or refuses it by name.
#pragma once

#include "json_node.h"
#include "regex.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer::tokenizer::detail {

// A stretch of (normalized) text on its way through the pre-tokenizers. `at_start`: it begins
// at offset 0 of the text given to encode() (Metaspace's prepend_scheme "first" reads it).
struct Piece {
  std::string text;
  bool at_start = false;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped by the caller.
  virtual void split(std::vector<Piece>& pieces) const = 0;
};

// Token ids for one pre-tokenized piece.
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual void tokenize(std::string_view piece, std::vector<int64_t>& ids) const = 0;
  // token -> id and id -> token of the model's vocabulary (added tokens are the tokenizer's).
  virtual std::optional<int64_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int64_t id) const = 0;
  virtual size_t vocab_size() const = 0;
};

// Adds the special tokens around one sequence (add_special_tokens = true).
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int64_t>& ids) const = 0;
};

// Turns tokens back into text pieces; the tokenizer joins what the chain leaves.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// The token string -> id lookup post-processors use to check their special tokens.
using TokenLookup = std::function<std::optional<int64_t>(std::string_view)>;

// Each returns nullptr for a JSON null (no such stage).
std::unique_ptr<Normalizer> make_normalizer(const Node& node);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node);
std::unique_ptr<TokenModel> make_model(const Node& node);
std::unique_ptr<PostProcessor> make_post_processor(const Node& node, const TokenLookup& lookup);
std::unique_ptr<Decoder> make_decoder(const Node& node);
// The stages with files of their own: the Unigram model (unigram.cpp) and the Precompiled
// normalizer (precompiled.cpp), called by make_model and make_normalizer.
std::unique_ptr<TokenModel> make_unigram_model(const Node& node);
std::unique_ptr<Normalizer> make_precompiled_normalizer(const Node& node);

// How Split-like stages treat the matches of their pattern (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
SplitBehavior read_split_behavior(const Node& node);
// A {"String": ...} (literal) or {"Regex": ...} pattern (Split, Replace).
Regex read_pattern(const Node& node);

// Splits every piece at the matches that `find` reports (byte ranges, left to right), as HF's
// NormalizedString::split does with `behavior`; `invert` swaps matches and the text between.
using MatchFinder =
    std::function<void(std::string_view, const std::function<void(size_t, size_t)>&)>;
void split_pieces(std::vector<Piece>& pieces, const MatchFinder& find, SplitBehavior behavior,
                  bool invert = false);
// A MatchFinder reporting each character for which `predicate` holds.
MatchFinder char_matches(std::function<bool(char32_t)> predicate);

// Metaspace's prepend_scheme (pre-tokenizer and decoder): "always" by default, "never" where the
// older add_prefix_space is false.
enum class PrependScheme { kAlways, kFirst, kNever };
PrependScheme read_prepend_scheme(const Node& metaspace);

// GPT-2's byte-to-character map of ByteLevel: printable bytes stand for themselves, the others
// for U+0100 onwards; and its inverse.
const std::string& byte_to_char(uint8_t byte);  // UTF-8 of the character
std::optional<uint8_t> char_to_byte(char32_t cp);

// Decodes one UTF-8 character at `pos` (valid UTF-8 assumed) and advances `pos`.
char32_t next_char(std::string_view text, size_t& pos);

}  // namespace shardformer::tokenizer::detail
