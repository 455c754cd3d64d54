// Printing of the chat-template renderer's values as Python does: str() and repr() (what
// {{ }} prints) and json.dumps() with the options of HF's tojson filter.
#include "chat_template_internal.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace shardformer::tokenizer::detail::jinja {

using K = Value::Kind;

namespace {
// Python's repr(float): the shortest round-trip digits, positional for exponents in [-4, 16).
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  if (exp >= 16 || exp < -4) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + ebuf;
  }
  if (exp < 0) return out + "0." + std::string(-exp - 1, '0') + digits;
  if (digits.size() <= static_cast<size_t>(exp) + 1) {
    return out + digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
}

// Whether Python's str.isprintable() is false for a non-ASCII code point (an approximation
// covering the C1 controls, Unicode spaces and separators, format and private-use characters).
bool nonprintable(char32_t c) {
  return c <= 0xA0 || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 ||
         c == 0xFEFF || (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) ||
         c >= 0xF0000;
}

std::string string_repr(const std::string& s) {
  char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t c : to_u32(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && nonprintable(c))) {
      const char* fmt = c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof(buf), fmt, static_cast<unsigned>(c));
      out += buf;
    } else {
      out += to_utf8(std::u32string(1, c));
    }
  }
  return out + quote;
}

std::string items_repr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + to_repr(items[i]);
  return out;
}

std::string dict_repr(const DictData& d) {
  std::string out = "{";
  for (size_t i = 0; i < d.items.size(); ++i) {
    out += (i ? ", " : "") + string_repr(d.items[i].first) + ": " + to_repr(d.items[i].second);
  }
  return out + "}";
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  char buf[16];
  for (char32_t c : to_u32(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          out += to_utf8(std::u32string(1, c));
        }
    }
  }
  return out + "\"";
}

void json_dump(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  auto newline = [&](int level) {
    if (!o.has_indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += o.indent;
  };
  switch (v.kind) {
    case K::kNone: out += "null"; return;
    case K::kBool: out += v.b ? "true" : "false"; return;
    case K::kInt: out += std::to_string(v.i); return;
    case K::kFloat:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f < 0 ? "-Infinity" : "Infinity";
      } else {
        out += float_repr(v.f);
      }
      return;
    case K::kString: out += json_string(v.s, o.ensure_ascii); return;
    case K::kList:
    case K::kTuple: {
      if (v.list->items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        json_dump(v.list->items[i], o, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case K::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.dict->items) items.push_back(&item);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        out += json_string(items[i]->first, o.ensure_ascii) + o.key_separator;
        json_dump(items[i]->second, o, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw Fault(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind) {
    case K::kString: return string_repr(v.s);
    case K::kUndefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case K::kUndefined: return "";
    case K::kNone: return "None";
    case K::kBool: return v.b ? "True" : "False";
    case K::kInt: return std::to_string(v.i);
    case K::kFloat: return float_repr(v.f);
    case K::kString: return v.s;
    case K::kList:
      if (!v.list->view.empty()) return v.list->view + "([" + items_repr(v.list->items) + "])";
      return "[" + items_repr(v.list->items) + "]";
    case K::kTuple:
      return "(" + items_repr(v.list->items) + (v.list->items.size() == 1 ? ",)" : ")");
    case K::kDict: return dict_repr(*v.dict);
    case K::kNamespace: return "<Namespace " + dict_repr(*v.dict) + ">";
    default:
      throw Fault(std::string("printing a ") + type_name(v) +
                  " object is not supported by the renderer");
  }
}

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_dump(v, options, 0, out);
  return out;
}

}  // namespace shardformer::tokenizer::detail::jinja
