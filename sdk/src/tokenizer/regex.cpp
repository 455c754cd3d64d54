// PCRE2 behind tokenizer.json's regexes: compiling with UTF + UCP + JIT, the Oniguruma
// differences translated, and a per-thread match buffer and JIT stack.
#include "regex.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace shardformer::tokenizer::detail {
namespace {

// Oniguruma (HF tokenizers' engine) and PCRE2 agree on \p{L}, \p{N}, lookaround and (?i:),
// but not on everything tokenizer.json patterns use, which is rewritten:
//  - Oniguruma's \s is the White_Space property; PCRE2's also takes U+180E and not U+0085.
//  - Oniguruma's \w is Unicode's word class; PCRE2 10.42's lacks the marks.
//  - A '[' inside a bracket starts a nested class in Oniguruma (BLOOM's "[^(\s|[.,!?])]"),
//    a literal in PCRE2: a nested non-negated class is a union, so its brackets are dropped.
std::string translate(std::string_view pattern, const std::string& origin) {
  constexpr std::string_view kSpace = "\\p{White_Space}";
  constexpr std::string_view kWord = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
  std::string out;
  int depth = 0;  // bracket nesting
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's' || e == 'w') {
        const std::string_view body = e == 's' ? kSpace : kWord;
        out += depth > 0 ? std::string(body) : str("[", body, "]");
      } else if ((e == 'S' || e == 'W') && depth == 0) {
        out += str("[^", e == 'S' ? kSpace : kWord, "]");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && depth > 0 && pattern.substr(i, 2) == "[:") {  // a POSIX class: as it is
      const size_t close = pattern.find(":]", i + 2);
      const size_t end = close == std::string_view::npos ? pattern.size() : close + 2;
      out += pattern.substr(i, end - i);
      i = end - 1;
      continue;
    }
    if (c == '[') {
      const bool negated = i + 1 < pattern.size() && pattern[i + 1] == '^';
      if (depth > 0 && negated) {
        throw ConfigError(str(origin, ": the regex \"", pattern,
                              "\" nests a negated class, which PCRE2 cannot express"));
      }
      if (depth++ == 0) {
        out += c;
        // A ']' or '^]' right after '[' is a literal member, not the end.
        if (negated) out += pattern[++i];
        if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      }
      continue;
    }
    if (c == ']' && depth > 0) {
      if (--depth == 0) out += c;
      continue;
    }
    out += c;
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Match data and a JIT stack per thread, reused by every pattern that thread runs.
struct ThreadScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  ThreadScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, const std::string& origin)
    : Regex(pattern, translate(pattern, origin), origin) {}

Regex::Regex(std::string_view pattern, const std::string& translated, const std::string& origin)
    : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code->code == nullptr) {
    throw ConfigError(str(origin, ": cannot compile the regex \"", pattern, "\" (as PCRE2 \"",
                          translated, "\", offset ", offset, "): ", pcre2_message(error)));
  }
  // Without the JIT (an unusual PCRE2 build) the interpreter gives the same matches.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  code_ = std::move(code);
}

Regex Regex::literal(std::string_view text, const std::string& origin) {
  std::string escaped;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return Regex(text, escaped, origin);
}

void Regex::find_all(std::string_view text,
                     const std::function<void(size_t, size_t)>& on_match) const {
  thread_local ThreadScratch scratch;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // The text is valid UTF-8 (checked once when the tokenizer decoded it).
    const int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                               scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw Error(str("tokenizer regex \"", pattern_, "\" failed at byte ", start, ": ",
                      pcre2_message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      on_match(begin, end);
      start = end;
    } else {
      // Step over one UTF-8 character.
      start = end + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
    }
  }
}

std::string Regex::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  size_t previous = 0;
  find_all(text, [&](size_t begin, size_t end) {
    out.append(text, previous, begin - previous);
    out += content;
    previous = end;
  });
  out.append(text, previous);
  return out;
}

}  // namespace shardformer::tokenizer::detail
