// Filters and tests of the chat-template renderer: jinja2's builtins as of 3.1 with HF's own
// tojson, each with jinja2's argument names and defaults. The others are refused by name.
#include "chat_template_internal.h"
#include "unicode.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace shardformer::tokenizer::detail::jinja {

using K = Value::Kind;

namespace {

const std::set<std::string> kUnsupportedFilters = {
    "attr",        "batch",    "center",    "e",      "escape",   "filesizeformat",
    "forceescape", "format",   "groupby",   "pprint", "random",   "slice",
    "striptags",   "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
const std::set<std::string> kUnsupportedTests = {"escaped", "filter", "test"};

Value arg_or(const Value& v, Value fallback) { return v.is_undefined() ? fallback : v; }

std::string as_str_arg(const Value& v, std::string_view what) {
  if (v.kind != K::kString)
    throw Fault(std::string(what) + " must be a string, not " + type_name(v));
  return v.s;
}

int64_t as_int_arg(const Value& v, std::string_view what) {
  if (v.kind == K::kBool) return v.b ? 1 : 0;
  if (v.kind != K::kInt)
    throw Fault(std::string(what) + " must be an integer, not " + type_name(v));
  return v.i;
}

// jinja2's make_attrgetter: "a.b.0" looks up items a, b, then index 0.
Value lookup_path(const Value& item, const Value& attribute) {
  if (attribute.kind == K::kInt) return get_item(item, attribute);
  Value v = item;
  std::string path = as_str_arg(attribute, "attribute");
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key =
      attribute.is_undefined() || attribute.kind == K::kNone ? item : lookup_path(item, attribute);
  if (!case_sensitive && key.kind == K::kString)
    key = Value::string(to_utf8(lowercase(to_u32(key.s), Flavor::kPython)));
  return key;
}

std::vector<Value> sorted(std::vector<Value> items, const std::function<Value(const Value&)>& key,
                          bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) keyed.emplace_back(key(item), std::move(item));
  // Python's sort is stable, and reverse=True keeps equal items in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

bool all_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

void require_ascii(const std::string& s, std::string_view what) {
  if (!all_ascii(s))
    throw Fault(std::string(what) + " of non-ASCII text is not supported by the renderer");
}

// jinja2's title filter: each piece between runs of whitespace, '-', '(', '{', '[' or '<' gets
// its first character upper-cased and the rest lower-cased.
std::string jinja_title(const std::string& s) {
  require_ascii(s, "title-casing");
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    bool sep = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
               c == '[' || c == '<';
    if (sep) {
      start = true;
    } else {
      c = start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      start = false;
    }
  }
  return out;
}

// Python's round(x, n) on a float: correctly rounded, half to even on the exact binary value.
double round_float(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits == 0) return std::nearbyint(x);
  if (digits > 300 || digits < -300) return digits > 0 ? x : 0.0 * x;
  if (digits < 0) {
    double p = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
  return std::strtod(buf, nullptr);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string current;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' ||
        c == '\x1e') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      lines.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

Value indent(const Value& input, const std::vector<Value>& a) {
  Value width = arg_or(a[0], Value::integer(4));
  std::string pad = width.kind == K::kString
                        ? width.s
                        : std::string(std::max<int64_t>(as_int_arg(width, "width"), 0), ' ');
  bool first = truthy(a[1]);
  bool blank = truthy(a[2]);
  std::vector<std::string> lines = split_lines(to_str(input) + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        rv += (i > 1 ? "\n" : "") + (lines[i].empty() ? "" : pad + lines[i]);
      }
    }
  }
  return Value::string(first ? pad + rv : rv);
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number())
    return Value::floating(
        v.kind == K::kFloat ? v.f : static_cast<double>(v.kind == K::kBool ? v.b : v.i));
  if (v.kind != K::kString) return fallback;
  std::string s = v.s;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  size_t a = s.find_first_not_of(" \t\n\r\v\f");
  size_t b = s.find_last_not_of(" \t\n\r\v\f");
  if (a == std::string::npos) return fallback;
  s = s.substr(a, b - a + 1);
  if (s.find_first_of("xXpP") != std::string::npos && s.find_first_of("iI") == std::string::npos)
    return fallback;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return fallback;
  return Value::floating(d);
}

Value to_int(const Value& v, const Value& fallback, int64_t base) {
  if (v.kind == K::kInt) return v;
  if (v.kind == K::kBool) return Value::integer(v.b);
  if (v.kind == K::kString) {
    std::string s = v.s;
    size_t a = s.find_first_not_of(" \t\n\r\v\f");
    size_t b = s.find_last_not_of(" \t\n\r\v\f");
    if (a != std::string::npos) {
      s = s.substr(a, b - a + 1);
      std::string digits;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '_' ||
            (i > 0 && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i - 1]))))
          digits += s[i];
      }
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
      if (!digits.empty() && end == digits.c_str() + digits.size() && errno == 0 &&
          std::isalnum(static_cast<unsigned char>(digits.back()))) {
        return Value::integer(n);
      }
    }
  }
  Value f = to_float(v, Value::none());
  if (f.kind != K::kFloat || !std::isfinite(f.f) || std::fabs(f.f) >= 9.2e18) return fallback;
  return Value::integer(static_cast<int64_t>(f.f));
}

Value min_max(const Value& input, const std::vector<Value>& a, bool is_max) {
  std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  bool case_sensitive = truthy(a[0]);
  const Value* best = &items[0];
  Value best_key = sort_key(items[0], a[1], case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], a[1], case_sensitive);
    if (is_max ? compare(best_key, key) < 0 : compare(key, best_key) < 0) {
      best = &items[i];
      best_key = key;
    }
  }
  return *best;
}

Value select_or_reject(const Value& input, CallArgs& args, bool select, bool by_attribute) {
  std::vector<Value> rest = args.positional;
  Value attribute;
  if (by_attribute) {
    if (rest.empty()) throw Fault("selectattr/rejectattr need an attribute");
    attribute = rest.front();
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = as_str_arg(rest.front(), "the test name");
    rest.erase(rest.begin());
    check_test(test);
  }
  CallArgs test_args{rest, args.keyword};
  std::vector<Value> out;
  for (const Value& item : iterate(input)) {
    Value v = by_attribute ? lookup_path(item, attribute) : item;
    bool ok = test.empty() ? truthy(v) : apply_test(test, v, test_args);
    if (ok == select) out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value map_filter(const Value& input, CallArgs& args) {
  std::vector<Value> out;
  if (!args.positional.empty()) {
    std::string filter = as_str_arg(args.positional.front(), "the filter name");
    check_filter(filter);
    CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
    for (const Value& item : iterate(input)) out.push_back(apply_filter(filter, item, rest));
  } else {
    std::vector<Value> a = args.bind("map", {"attribute", "default"});
    if (a[0].is_undefined()) throw Fault("map() needs a filter name or attribute=");
    for (const Value& item : iterate(input)) {
      Value v = lookup_path(item, a[0]);
      out.push_back(v.is_undefined() && !a[1].is_undefined() ? a[1] : v);
    }
  }
  return Value::iterator(std::move(out));
}

Value tojson(const Value& input, const std::vector<Value>& a) {
  JsonOptions o;
  o.ensure_ascii = truthy(a[0]);
  if (!a[1].is_undefined() && a[1].kind != K::kNone) {
    o.has_indent = true;
    o.indent = a[1].kind == K::kString
                   ? a[1].s
                   : std::string(std::max<int64_t>(as_int_arg(a[1], "indent"), 0), ' ');
    o.item_separator = ",";
  }
  if (!a[2].is_undefined() && a[2].kind != K::kNone) {
    if (!a[2].is_sequence() || a[2].list->items.size() != 2)
      throw Fault("separators must be a pair of strings");
    o.item_separator = as_str_arg(a[2].list->items[0], "a separator");
    o.key_separator = as_str_arg(a[2].list->items[1], "a separator");
  }
  o.sort_keys = truthy(a[3]);
  return Value::string(to_json(input, o));
}

Value first_or_last(const Value& input, bool last) {
  if (input.kind == K::kIterator) {
    if (last) throw Fault("'generator' object is not reversible");
    auto& it = *input.iter;
    return it.pos < it.items.size() ? it.items[it.pos++]
                                    : Value::undefined("No first item, sequence was empty.");
  }
  std::vector<Value> items = iterate(input);
  if (items.empty())
    return Value::undefined(last ? "No last item, sequence was empty."
                                 : "No first item, sequence was empty.");
  return last ? items.back() : items.front();
}

Value reverse(const Value& input) {
  if (input.kind == K::kString) {
    std::u32string s = to_u32(input.s);
    std::reverse(s.begin(), s.end());
    return Value::string(to_utf8(s));
  }
  std::vector<Value> items = iterate(input);
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator; a generator is not reversible, so jinja2 makes a list of it.
  return input.kind == K::kIterator ? Value::make_list(std::move(items))
                                    : Value::iterator(std::move(items));
}

Value round_filter(const Value& input, const std::vector<Value>& a) {
  int64_t precision = as_int_arg(arg_or(a[0], Value::integer(0)), "precision");
  std::string method = as_str_arg(arg_or(a[1], Value::string("common")), "method");
  if (!input.is_number())
    throw Fault(std::string("round of a ") + type_name(input) + " is not possible");
  if (method == "common") {
    if (input.kind != K::kFloat) {
      if (precision >= 0) return Value::integer(input.kind == K::kBool ? input.b : input.i);
      throw Fault("round of an integer to negative precision is not supported by the renderer");
    }
    return Value::floating(round_float(input.f, precision));
  }
  if (method != "ceil" && method != "floor")
    throw Fault("method must be 'common', 'ceil' or 'floor'");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = input.kind == K::kFloat
                 ? input.f
                 : static_cast<double>(input.kind == K::kBool ? input.b : input.i);
  return Value::floating((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

}  // namespace

void check_filter(const std::string& name) {
  static const std::set<std::string> kSupported = {
      "abs",   "capitalize", "count",      "d",       "default", "dictsort",
      "first", "float",      "indent",     "int",     "items",   "join",
      "last",  "length",     "list",       "lower",   "map",     "max",
      "min",   "reject",     "rejectattr", "replace", "reverse", "round",
      "safe",  "select",     "selectattr", "sort",    "string",  "sum",
      "title", "tojson",     "trim",       "unique",  "upper",   "wordcount"};
  if (kSupported.count(name)) return;
  if (kUnsupportedFilters.count(name))
    throw Fault("filter '" + name + "' is not supported by the renderer");
  throw Fault("no filter named '" + name +
              "' (not a jinja2 filter; not supported by the renderer)");
}

void check_test(const std::string& name) {
  static const std::set<std::string> kSupported = {
      "boolean", "callable", "defined",  "divisibleby", "eq",          "equalto",
      "even",    "false",    "float",    "ge",          "greaterthan", "gt",
      "in",      "integer",  "iterable", "le",          "lessthan",    "lower",
      "lt",      "mapping",  "ne",       "none",        "number",      "odd",
      "sameas",  "sequence", "string",   "true",        "undefined",   "upper"};
  if (kSupported.count(name)) return;
  if (kUnsupportedTests.count(name))
    throw Fault("test '" + name + "' is not supported by the renderer");
  throw Fault("no test named '" + name + "' (not a jinja2 test; not supported by the renderer)");
}

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  auto bind = [&](const std::vector<std::string_view>& names) { return args.bind(name, names); };
  if (name == "default" || name == "d") {
    std::vector<Value> a = bind({"default_value", "boolean"});
    bool use_default = input.is_undefined() || (truthy(a[1]) && !truthy(input));
    return use_default ? arg_or(a[0], Value::string("")) : input;
  }
  if (name == "length" || name == "count") return Value::integer(length(input));
  if (name == "tojson")
    return tojson(input, bind({"ensure_ascii", "indent", "separators", "sort_keys"}));
  if (name == "string" || name == "safe") return Value::string(to_str(input));
  if (name == "trim") {
    std::vector<Value> a = bind({"chars"});
    CallArgs call{{a[0].is_undefined() ? Value::none() : a[0]}, {}};
    return bound_method(Value::string(to_str(input)), "strip").fn->call(call);
  }
  if (name == "upper" || name == "lower" || name == "capitalize") {
    bind({});
    CallArgs none;
    return bound_method(Value::string(to_str(input)), name).fn->call(none);
  }
  if (name == "title") {
    bind({});
    return Value::string(jinja_title(to_str(input)));
  }
  if (name == "first" || name == "last") {
    bind({});
    return first_or_last(input, name == "last");
  }
  if (name == "join") {
    std::vector<Value> a = bind({"d", "attribute"});
    std::string sep = to_str(arg_or(a[0], Value::string("")));
    std::string out;
    bool first = true;
    for (const Value& item : iterate(input)) {
      out += (first ? "" : sep) + to_str(a[1].is_undefined() ? item : lookup_path(item, a[1]));
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (name == "list") return Value::make_list(iterate(input));
  if (name == "int") {
    std::vector<Value> a = bind({"default", "base"});
    return to_int(input, arg_or(a[0], Value::integer(0)),
                  as_int_arg(arg_or(a[1], Value::integer(10)), "base"));
  }
  if (name == "float") return to_float(input, arg_or(bind({"default"})[0], Value::floating(0.0)));
  if (name == "replace") {
    std::vector<Value> a = bind({"old", "new", "count"});
    CallArgs call{{a[0], a[1]}, {}};
    if (!a[2].is_undefined() && a[2].kind != K::kNone) call.positional.push_back(a[2]);
    return bound_method(Value::string(to_str(input)), "replace").fn->call(call);
  }
  if (name == "select" || name == "reject")
    return select_or_reject(input, args, name == "select", false);
  if (name == "selectattr" || name == "rejectattr") {
    return select_or_reject(input, args, name == "selectattr", true);
  }
  if (name == "map") return map_filter(input, args);
  if (name == "items") {
    bind({});
    if (input.is_undefined()) return Value::iterator({});
    if (input.kind != K::kDict) throw Fault("Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.dict->items)
      pairs.push_back(Value::make_list({Value::string(k), v}, K::kTuple));
    return Value::iterator(std::move(pairs));
  }
  if (name == "dictsort") {
    std::vector<Value> a = bind({"case_sensitive", "by", "reverse"});
    if (input.kind != K::kDict) throw Fault("You can only sort by either a mapping");
    std::string by = as_str_arg(arg_or(a[1], Value::string("key")), "by");
    if (by != "key" && by != "value")
      throw Fault("You can only sort by either \"key\" or \"value\"");
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.dict->items)
      pairs.push_back(Value::make_list({Value::string(k), v}, K::kTuple));
    bool case_sensitive = truthy(a[0]);
    Value index = Value::integer(by == "key" ? 0 : 1);
    return Value::make_list(sorted(
        std::move(pairs),
        [&](const Value& p) { return sort_key(get_item(p, index), Value(), case_sensitive); },
        truthy(a[2])));
  }
  if (name == "sort") {
    std::vector<Value> a = bind({"reverse", "case_sensitive", "attribute"});
    bool case_sensitive = truthy(a[1]);
    return Value::make_list(sorted(
        iterate(input), [&](const Value& v) { return sort_key(v, a[2], case_sensitive); },
        truthy(a[0])));
  }
  if (name == "unique") {
    std::vector<Value> a = bind({"case_sensitive", "attribute"});
    std::vector<Value> out;
    std::vector<Value> seen;
    for (const Value& item : iterate(input)) {
      Value key = sort_key(item, a[1], truthy(a[0]));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::iterator(std::move(out));
  }
  if (name == "reverse") return reverse(input);
  if (name == "indent") return indent(input, bind({"width", "first", "blank"}));
  if (name == "abs") {
    if (input.kind == K::kFloat) return Value::floating(std::fabs(input.f));
    if (input.kind == K::kInt || input.kind == K::kBool) {
      int64_t v = input.kind == K::kBool ? input.b : input.i;
      if (v == INT64_MIN) throw Fault("integer overflow in abs");
      return Value::integer(v < 0 ? -v : v);
    }
    throw Fault(std::string("bad operand type for abs(): '") + type_name(input) + "'");
  }
  if (name == "round") return round_filter(input, bind({"precision", "method"}));
  if (name == "sum") {
    std::vector<Value> a = bind({"attribute", "start"});
    Value total = arg_or(a[1], Value::integer(0));
    for (const Value& item : iterate(input)) {
      total = binary_op("+", total, a[0].is_undefined() ? item : lookup_path(item, a[0]));
    }
    return total;
  }
  if (name == "min" || name == "max")
    return min_max(input, bind({"case_sensitive", "attribute"}), name == "max");
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : to_u32(to_str(input))) {
      bool word = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0
                                        : !is_split_space(c, Flavor::kPython));
      if (word && !in_word) ++words;
      in_word = word;
    }
    return Value::integer(words);
  }
  throw Fault("filter '" + name + "' is not supported by the renderer");
}

bool apply_test(const std::string& name, const Value& input, CallArgs& args) {
  auto arg = [&]() { return args.bind(name, {"other"})[0]; };
  auto cmp = [&]() { return compare(input, arg()); };
  const K k = input.kind;
  if (name == "defined") return k != K::kUndefined;
  if (name == "undefined") return k == K::kUndefined;
  if (name == "none") return k == K::kNone;
  if (name == "boolean") return k == K::kBool;
  if (name == "true") return k == K::kBool && input.b;
  if (name == "false") return k == K::kBool && !input.b;
  if (name == "integer") return k == K::kInt;
  if (name == "float") return k == K::kFloat;
  if (name == "number") return input.is_number();
  if (name == "string") return k == K::kString;
  if (name == "mapping") return k == K::kDict;
  if (name == "callable") return k == K::kFunction;
  if (name == "iterable") {
    return k == K::kString || input.is_sequence() || k == K::kDict || k == K::kIterator ||
           k == K::kUndefined;
  }
  if (name == "sequence")
    return k == K::kString || input.is_sequence() || k == K::kDict || k == K::kUndefined;
  if (name == "even" || name == "odd" || name == "divisibleby") {
    Value divisor = name == "divisibleby" ? args.bind(name, {"num"})[0] : Value::integer(2);
    Value rest = binary_op("%", input, divisor);
    bool zero = !truthy(rest);
    return name == "odd" ? !zero : zero;
  }
  if (name == "eq" || name == "equalto") return equals(input, arg());
  if (name == "ne") return !equals(input, arg());
  if (name == "lt" || name == "lessthan") return cmp() < 0;
  if (name == "le") return cmp() <= 0;
  if (name == "gt" || name == "greaterthan") return cmp() > 0;
  if (name == "ge") return cmp() >= 0;
  if (name == "in") return contains(args.bind(name, {"seq"})[0], input);
  if (name == "sameas") {
    Value other = arg();
    if (k != other.kind) return false;
    switch (k) {
      case K::kNone:
      case K::kUndefined: return true;
      case K::kBool: return input.b == other.b;
      case K::kList:
      case K::kTuple: return input.list == other.list;
      case K::kDict:
      case K::kNamespace: return input.dict == other.dict;
      default:
        throw Fault("'sameas' on a " + std::string(type_name(input)) +
                    " is not supported by the renderer");
    }
  }
  if (name == "lower" || name == "upper") {
    std::string s = to_str(input);
    require_ascii(s, "the lower/upper test");
    bool cased = false;
    for (char c : s) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        cased = true;
        if ((name == "lower") != (std::islower(static_cast<unsigned char>(c)) != 0)) return false;
      }
    }
    return cased;
  }
  throw Fault("test '" + name + "' is not supported by the renderer");
}

}  // namespace shardformer::tokenizer::detail::jinja
