// Regex: the Oniguruma-flavoured patterns of tokenizer.json (Split, Replace) run by PCRE2 in
// UTF mode with Unicode properties and its JIT. Compiled once, shared by every thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace shardformer::tokenizer::detail {

class Regex {
 public:
  // Compiles `pattern`; throws ConfigError naming `origin`, the offset and PCRE2's reason.
  // Where Oniguruma (HF's engine) and PCRE2 read a pattern differently (\s, \w, nested
  // brackets), the pattern is rewritten to Oniguruma's meaning (regex.cpp).
  Regex(std::string_view pattern, const std::string& origin);
  // A pattern matching `text` literally (tokenizer.json's {"String": ...} patterns).
  static Regex literal(std::string_view text, const std::string& origin);

  // Calls on_match(start, end) with the byte offsets of each non-overlapping match, left to
  // right; an empty match moves the search on by one character and is not reported.
  void find_all(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;
  // `text` with every match replaced by `content` (Replace normalizer and decoder).
  std::string replace_all(std::string_view text, std::string_view content) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  // Compiles `pcre2_pattern` as it is; `pattern` is what errors show.
  Regex(std::string_view pattern, const std::string& pcre2_pattern, const std::string& origin);
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace shardformer::tokenizer::detail
