// Lexer of the chat-template renderer: jinja2's tokenizer with trim_blocks and lstrip_blocks,
// including its whitespace control ({%- -%} {{- -}} {%+ +%}), comments and raw blocks.
#include "chat_template_internal.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "shardformer/error.h"

namespace shardformer::tokenizer::detail {

void throw_error(const std::string& origin, int line, int col, const std::string& message) {
  throw ConfigError(origin + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                    message);
}

namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  // keep_trailing_newline=False: one trailing newline is dropped.
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& origin) : src_(std::move(source)), origin_(origin) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      char type = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      size_t raw_body = type == '%' ? match_raw_begin(tag) : std::string::npos;
      std::string text = src_.substr(pos_, tag - pos_);
      apply_left_control(text, sign, type != '{', line_starting);
      emit_text(std::move(text), pos_);
      size_t body = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (raw_body != std::string::npos) {
        line_starting = lex_raw(tag, raw_body);
      } else if (type == '#') {
        line_starting = lex_comment(tag, body);
      } else {
        line_starting = lex_tag(tag, body, type == '{');
      }
    }
    tokens_.push_back(make(Token::Kind::kEnd, "", src_.size()));
    return std::move(tokens_);
  }

 private:
  // The first "{{", "{%" or "{#" at or after `from`.
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // jinja2's OptionalLStrip: `{%-` strips all whitespace before the tag; otherwise lstrip_blocks
  // strips the spaces and tabs between the line start and a block or comment tag.
  static void apply_left_control(std::string& text, char sign, bool lstrip, bool line_starting) {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_ascii_space(text[end - 1])) --end;
      text.resize(end);
    } else if (sign != '+' && lstrip) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool blank = l_pos < text.size();
        for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_ascii_space(text[i]);
        if (blank) text.resize(l_pos);
      }
    }
  }

  // Where a block end matches at `at`: "+%}", "-%}" then whitespace, or "%}" then one newline.
  // Returns the position after it, or npos. `trim` is false for the end of `{% raw %}`.
  size_t match_block_end(size_t at, bool trim) const {
    auto starts = [&](size_t p, std::string_view s) { return src_.compare(p, s.size(), s) == 0; };
    if (trim && starts(at, "+%}")) return at + 3;
    if (starts(at, "-%}")) {
      size_t p = at + 3;
      while (p < src_.size() && is_ascii_space(src_[p])) ++p;
      return p;
    }
    if (starts(at, "%}")) {
      size_t p = at + 2;
      if (trim && p < src_.size() && src_[p] == '\n') ++p;
      return p;
    }
    return std::string::npos;
  }

  size_t skip_space(size_t p) const {
    while (p < src_.size() && is_ascii_space(src_[p])) ++p;
    return p;
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at `tag`: returns where the raw text starts, or npos.
  size_t match_raw_begin(size_t tag) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = skip_space(p + 3);
    return match_block_end(p, false);
  }

  bool lex_raw(size_t tag, size_t body) {
    bool raw_line_starting = src_[body - 1] == '\n';
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      char sign = i + 2 < src_.size() ? src_[i + 2] : '\0';
      size_t p = skip_space(i + 2 + (sign == '-' || sign == '+' ? 1 : 0));
      if (src_.compare(p, 6, "endraw") != 0) continue;
      size_t end = match_block_end(skip_space(p + 6), true);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(body, i - body);
      apply_left_control(text, sign, true, raw_line_starting);
      emit_text(std::move(text), body);
      pos_ = end;
      return src_[end - 1] == '\n';
    }
    error_at(tag, "missing end of raw directive ({% endraw %})");
  }

  bool lex_comment(size_t tag, size_t body) {
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      size_t end = std::string::npos;
      if (src_.compare(i, 3, "+#}") == 0) {
        end = i + 3;
      } else if (src_.compare(i, 3, "-#}") == 0) {
        end = skip_space(i + 3);
      } else if (src_.compare(i, 2, "#}") == 0) {
        end = i + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end != std::string::npos) {
        pos_ = end;
        return src_[end - 1] == '\n';
      }
    }
    error_at(tag, "missing end of comment tag (#})");
  }

  // The tokens of a {{ }} or {% %} tag up to and including its end.
  bool lex_tag(size_t tag, size_t body, bool variable) {
    tokens_.push_back(make(variable ? Token::Kind::kVariableBegin : Token::Kind::kBlockBegin,
                           variable ? "{{" : "{%", tag));
    std::vector<char> brackets;
    size_t p = body;
    while (true) {
      p = skip_space(p);
      if (p >= src_.size()) {
        error_at(tag, std::string("unexpected end of template: the ") +
                          (variable ? "'{{' here is missing its '}}'"
                                    : "'{%' here is missing its '%}'"));
      }
      if (brackets.empty()) {
        size_t end = std::string::npos;
        if (variable) {
          if (src_.compare(p, 3, "-}}") == 0) end = skip_space(p + 3);
          if (src_.compare(p, 2, "}}") == 0) end = p + 2;
        } else {
          end = match_block_end(p, true);
        }
        if (end != std::string::npos) {
          tokens_.push_back(
              make(variable ? Token::Kind::kVariableEnd : Token::Kind::kBlockEnd, "", p));
          pos_ = end;
          return src_[end - 1] == '\n';
        }
      }
      p = lex_token(p, brackets);
    }
  }

  size_t lex_token(size_t p, std::vector<char>& brackets) {
    char c = src_[p];
    if (is_digit(c)) return lex_number(p);
    if (is_name_start(c)) {
      size_t e = p;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      tokens_.push_back(make(Token::Kind::kName, src_.substr(p, e - p), p));
      return e;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                             "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                             ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOperators) {
      std::string_view o(op);
      if (src_.compare(p, o.size(), o) != 0) continue;
      if (o == "(" || o == "[" || o == "{") {
        brackets.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
      } else if (o == ")" || o == "]" || o == "}") {
        if (brackets.empty()) error_at(p, "unexpected '" + std::string(o) + "'");
        if (brackets.back() != o[0]) {
          error_at(p, "unexpected '" + std::string(o) + "', expected '" +
                          std::string(1, brackets.back()) + "'");
        }
        brackets.pop_back();
      }
      tokens_.push_back(make(Token::Kind::kOperator, std::string(o), p));
      return p + o.size();
    }
    error_at(p, "unexpected character '" + std::string(1, c) + "'");
  }

  // Integers (with `_` separators, 0x/0o/0b) and floats (`1.5`, `1e3`, `1.5e-3`).
  size_t lex_number(size_t p) {
    auto digits = [&](size_t q) {
      size_t s = q;
      while (q < src_.size() &&
             (is_digit(src_[q]) ||
              (src_[q] == '_' && q > s && q + 1 < src_.size() && is_digit(src_[q + 1])))) {
        ++q;
      }
      return q;
    };
    auto clean = [&](size_t a, size_t b) {
      std::string s;
      for (size_t i = a; i < b; ++i) {
        if (src_[i] != '_') s += src_[i];
      }
      return s;
    };
    if (src_[p] == '0' && p + 1 < src_.size() &&
        std::string_view("xXoObB").find(src_[p + 1]) != std::string_view::npos) {
      int base = (src_[p + 1] | 0x20) == 'x' ? 16 : (src_[p + 1] | 0x20) == 'o' ? 8 : 2;
      size_t e = p + 2;
      while (e < src_.size() &&
             (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
      Token t = make(Token::Kind::kInt, src_.substr(p, e - p), p);
      t.int_value = std::strtoll(clean(p + 2, e).c_str(), nullptr, base);
      tokens_.push_back(std::move(t));
      return e;
    }
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text = clean(p, e);
    Token t = make(is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, p);
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE)
        error_at(p, "integer literal " + text + " is too large for the renderer");
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  // A quoted string with Python's escapes (\n \t \\ \' \" \xNN \uNNNN \UNNNNNNNN, octal).
  size_t lex_string(size_t p) {
    char quote = src_[p];
    std::string out;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) error_at(p, "unterminated string literal");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        ++i;
        continue;
      }
      char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          std::string hex = src_.substr(i, n);
          bool ok = hex.size() == n;
          for (char h : hex) ok = ok && std::isxdigit(static_cast<unsigned char>(h));
          if (!ok) error_at(i - 2, std::string("truncated \\") + e + " escape in string literal");
          unsigned long cp = std::strtoul(hex.c_str(), nullptr, 16);
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            error_at(i - 2, "escape \\" + std::string(1, e) + hex +
                                " is not a character the renderer supports");
          }
          out += jinja::to_utf8(std::u32string(1, static_cast<char32_t>(cp)));
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = e - '0';
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7';
                 ++k, ++i) {
              cp = cp * 8 + (src_[i] - '0');
            }
            out += jinja::to_utf8(std::u32string(1, static_cast<char32_t>(cp)));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(make(Token::Kind::kString, std::move(out), p));
    return i + 1;
  }

  void emit_text(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back(make(Token::Kind::kText, std::move(text), at));
  }

  Token make(Token::Kind kind, std::string text, size_t at) {
    Token t{kind, std::move(text)};
    position(at, t.line, t.col);
    return t;
  }

  void position(size_t at, int& line, int& col) {
    // Tokens come in source order, so the line count is carried forward.
    if (at < counted_) {
      counted_ = 0;
      line_ = 1;
      line_start_ = 0;
    }
    for (; counted_ < at && counted_ < src_.size(); ++counted_) {
      if (src_[counted_] == '\n') {
        ++line_;
        line_start_ = counted_ + 1;
      }
    }
    line = line_;
    col = static_cast<int>(at - line_start_) + 1;
  }

  [[noreturn]] void error_at(size_t at, const std::string& message) {
    int line = 0;
    int col = 0;
    position(at, line, col);
    throw_error(origin_, line, col, message);
  }

  std::string src_;
  const std::string& origin_;
  size_t pos_ = 0;
  size_t counted_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& origin) {
  return Lexer(normalize_newlines(source), origin).run();
}

}  // namespace shardformer::tokenizer::detail
