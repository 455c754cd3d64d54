// Splitting text into words before WordPiece: added-token matching, tokenizers' BertNormalizer
// and BertPreTokenizer (tokenizer.json), and transformers' slow BasicTokenizer (vocab.txt).
#include "tokenizer_data.h"

#include <algorithm>

namespace shardformer::tokenizer::detail {
namespace {

constexpr char32_t kReplacementCharacter = 0xFFFD;

// Appends the maximal runs of `text` between characters for which `is_separator` holds.
template <typename Predicate>
void split_on(std::u32string_view text, Predicate is_separator, std::vector<std::u32string>& out) {
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || is_separator(text[i])) {
      if (i > start) out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
}

// clean_text: the shared rule, with each flavour's character classes.
std::u32string clean_text(std::u32string_view text, Flavor flavor) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (cp == 0 || cp == kReplacementCharacter || is_control(cp, flavor)) continue;
    out.push_back(is_clean_space(cp, flavor) ? U' ' : cp);
  }
  return out;
}

std::u32string pad_chinese_chars(std::u32string_view text, Flavor flavor) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (is_chinese_char(cp, flavor)) {
      out.push_back(U' ');
      out.push_back(cp);
      out.push_back(U' ');
    } else {
      out.push_back(cp);
    }
  }
  return out;
}

std::u32string strip_accents(std::u32string_view text, Flavor flavor) {
  std::u32string decomposed = nfd(text, flavor);
  std::erase_if(decomposed, [flavor](char32_t cp) { return is_nonspacing_mark(cp, flavor); });
  return decomposed;
}

}  // namespace

void AddedTokenMatcher::add(std::u32string pattern, int64_t id) {
  if (pattern.empty()) return;
  char32_t first = pattern.front();
  patterns_.emplace_back(std::move(pattern), id);
  std::vector<size_t>& candidates = by_first_[first];
  candidates.push_back(patterns_.size() - 1);
  std::stable_sort(candidates.begin(), candidates.end(), [this](size_t a, size_t b) {
    return patterns_[a].first.size() > patterns_[b].first.size();
  });
}

void AddedTokenMatcher::split(std::u32string_view text,
                              const std::function<void(std::u32string_view)>& on_text,
                              const std::function<void(int64_t)>& on_token) const {
  size_t piece_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const std::pair<std::u32string, int64_t>* match = nullptr;
    if (auto it = by_first_.find(text[i]); it != by_first_.end()) {
      for (size_t index : it->second) {
        const auto& candidate = patterns_[index];
        if (text.substr(i).starts_with(candidate.first)) {
          match = &candidate;
          break;
        }
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > piece_start) on_text(text.substr(piece_start, i - piece_start));
    on_token(match->second);
    i += match->first.size();
    piece_start = i;
  }
  if (text.size() > piece_start) on_text(text.substr(piece_start));
}

std::u32string bert_normalize(const NormalizerOptions& options, std::u32string_view text) {
  constexpr Flavor kFlavor = Flavor::kTokenizers;
  std::u32string out(text);
  if (options.clean_text) out = clean_text(out, kFlavor);
  if (options.handle_chinese_chars) out = pad_chinese_chars(out, kFlavor);
  if (options.strip_accents) out = strip_accents(out, kFlavor);
  if (options.lowercase) out = lowercase(out, kFlavor);
  return out;
}

void bert_pre_tokenize(std::u32string_view text, std::vector<Word>& words) {
  constexpr Flavor kFlavor = Flavor::kTokenizers;
  size_t start = 0;
  auto flush = [&](size_t end) {
    if (end > start) words.push_back({std::u32string(text.substr(start, end - start)), false});
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_split_space(text[i], kFlavor)) {
      flush(i);
      start = i + 1;
    } else if (is_punctuation(text[i], kFlavor)) {
      flush(i);
      words.push_back({std::u32string(1, text[i]), false});
      start = i + 1;
    }
  }
  flush(text.size());
}

void basic_tokenize(const TokenizerData& data, std::u32string_view text, std::vector<Word>& words) {
  constexpr Flavor kFlavor = Flavor::kPython;
  auto is_python_space = [](char32_t cp) { return is_split_space(cp, kFlavor); };
  std::vector<std::u32string> tokens;
  if (!data.basic_tokenize) {
    split_on(text, is_python_space, tokens);
    for (std::u32string& token : tokens) words.push_back({std::move(token), false});
    return;
  }
  const NormalizerOptions& options = data.normalizer;
  std::u32string cleaned = clean_text(text, kFlavor);
  if (options.handle_chinese_chars) cleaned = pad_chinese_chars(cleaned, kFlavor);
  split_on(nfc(cleaned), is_python_space, tokens);

  auto never_split = [&data](std::u32string_view token) {
    return !data.basic_never_split.empty() && data.basic_never_split.contains(encode_utf8(token));
  };
  std::vector<std::u32string> split_tokens;
  for (std::u32string& token : tokens) {
    if (!never_split(token)) {
      if (options.lowercase) token = lowercase(token, kFlavor);
      if (options.strip_accents) token = strip_accents(token, kFlavor);
    }
    if (never_split(token)) {
      split_tokens.push_back(std::move(token));
      continue;
    }
    // _run_split_on_punc: every punctuation character on its own.
    size_t start = 0;
    for (size_t i = 0; i <= token.size(); ++i) {
      bool punct = i < token.size() && is_punctuation(token[i], kFlavor);
      if (i == token.size() || punct) {
        if (i > start) split_tokens.push_back(token.substr(start, i - start));
        if (punct) split_tokens.emplace_back(1, token[i]);
        start = i + 1;
      }
    }
  }
  for (std::u32string& token : split_tokens) {
    std::vector<std::u32string> parts;
    split_on(token, is_python_space, parts);
    for (std::u32string& part : parts) {
      bool whole = !data.never_split.empty() && data.never_split.contains(encode_utf8(part));
      words.push_back({std::move(part), whole});
    }
  }
}

}  // namespace shardformer::tokenizer::detail
