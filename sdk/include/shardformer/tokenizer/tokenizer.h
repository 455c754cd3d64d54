// Tokenizer: a model folder's tokenizer.json run as HF tokenizers runs it (added tokens,
// normalizer, pre-tokenizer, BPE or WordPiece model, post-processor, decoder), text to ids and
// back, plus DecodeStream for printing generated text as it comes. No LibTorch needed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer::tokenizer {

namespace detail {
struct PipelineData;
}  // namespace detail

// The special tokens and template tokenizer_config.json names (transformers' view of the
// folder); each absent when the file does not name it.
struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  // The chat template: tokenizer_config.json's "chat_template" (its "default" entry where it
  // is a list), else chat_template.jinja beside it; with the file it came from.
  std::optional<std::string> chat_template;
  std::filesystem::path chat_template_source;
};

// An immutable tokenizer, cheap to copy; every method is const and thread-safe.
class Tokenizer {
 public:
  // A tokenizer.json, or a folder holding one (and optionally tokenizer_config.json and
  // chat_template.jinja). A stage or option the file names that is not supported is refused by
  // name (ConfigError naming the file and the key path); so is any unknown key.
  static Tokenizer from_file(const std::filesystem::path& path);

  // Token ids of `text` (UTF-8; invalid UTF-8 throws naming the byte offset), with the
  // post-processor's special tokens unless told not to. Added tokens written in the text
  // (such as "<|im_start|>") are matched first, as in HF.
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The normalizer's output (HF's normalizer.normalize_str); the text itself without one.
  std::string normalize(std::string_view text) const;
  // Text of `ids` as HF's decode: the decoder chain, special tokens dropped when asked, and
  // transformers' clean-up where tokenizer_config.json enables it (never for BPE models, as
  // transformers). Throws Error for an id no token has.
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens = true) const;

  std::optional<int64_t> token_to_id(std::string_view token) const;
  // Throws Error for an id no token has.
  std::string id_to_token(int64_t id) const;
  bool is_special(int64_t id) const;
  // Number of ids: the model's vocabulary plus added tokens outside it (HF's len(tokenizer)).
  size_t vocab_size() const;

  const TokenizerConfig& config() const;
  const std::filesystem::path& source() const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::PipelineData> data);
  std::shared_ptr<const detail::PipelineData> data_;
};

// Incremental decoding for streaming generated tokens, as HF tokenizers' DecodeStream: step()
// returns the text the new token completes, or "" while it ends inside a UTF-8 character or
// an unfinished byte sequence; a few earlier tokens are decoded with it for context (so that,
// e.g., a SentencePiece word keeps its leading space).
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  std::string step(int64_t id);

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<int64_t> ids_;  // the window: context tokens, then those not yet returned
  std::string prefix_;        // decode() of the context tokens
  size_t prefix_index_ = 0;   // where the context tokens end in ids_
};

}  // namespace shardformer::tokenizer
