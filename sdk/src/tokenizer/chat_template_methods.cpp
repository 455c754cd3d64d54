// Methods and globals of the chat-template renderer: Python's str and dict methods that templates
// call, the sandbox's refusal of mutating ones, and the globals of HF's environment.
#include "chat_template_internal.h"
#include "unicode.h"

#include <algorithm>
#include <ctime>
#include <set>

namespace shardformer::tokenizer::detail::jinja {

using K = Value::Kind;

namespace {

const std::set<std::string> kStrMethods = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const std::set<std::string> kListMethods = {"append", "clear",   "copy",   "count",
                                            "extend", "index",   "insert", "pop",
                                            "remove", "reverse", "sort"};
const std::set<std::string> kTupleMethods = {"count", "index"};
const std::set<std::string> kDictMethods = {"clear",      "copy",   "fromkeys", "get",
                                            "items",      "keys",   "pop",      "popitem",
                                            "setdefault", "update", "values"};
// What jinja2's ImmutableSandboxedEnvironment refuses: methods that change a list or dict.
const std::set<std::string> kMutating = {"append",     "clear",   "extend", "insert",
                                         "pop",        "popitem", "remove", "reverse",
                                         "setdefault", "sort",    "update"};

std::string arg_str(const Value& v, std::string_view method) {
  if (v.kind != K::kString) {
    throw Fault(std::string(method) + "() argument must be str, not " + type_name(v));
  }
  return v.s;
}

bool is_python_space(char32_t c) { return is_split_space(c, Flavor::kPython); }

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string text = to_u32(s);
  bool by_space = chars.is_undefined() || chars.kind == K::kNone;
  std::u32string set = by_space ? std::u32string() : to_u32(arg_str(chars, "strip"));
  auto strippable = [&](char32_t c) {
    return by_space ? is_python_space(c) : set.find(c) != std::u32string::npos;
  };
  size_t a = 0;
  size_t b = text.size();
  while (left && a < b && strippable(text[a])) ++a;
  while (right && b > a && strippable(text[b - 1])) --b;
  return to_utf8(text.substr(a, b - a));
}

Value split(const std::string& s, const Value& sep_value, const Value& maxsplit_value,
            bool from_right) {
  int64_t maxsplit = maxsplit_value.is_undefined() ? -1 : maxsplit_value.i;
  std::vector<std::string> parts;
  if (sep_value.is_undefined() || sep_value.kind == K::kNone) {
    std::u32string text = to_u32(s);
    if (from_right) std::reverse(text.begin(), text.end());
    size_t i = 0;
    while (true) {
      while (i < text.size() && is_python_space(text[i])) ++i;
      if (i >= text.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = text.size();
        while (end > i && is_python_space(text[end - 1])) --end;
        std::u32string rest = text.substr(i, end - i);
        if (from_right) std::reverse(rest.begin(), rest.end());
        parts.push_back(to_utf8(rest));
        break;
      }
      size_t j = i;
      while (j < text.size() && !is_python_space(text[j])) ++j;
      std::u32string word = text.substr(i, j - i);
      if (from_right) std::reverse(word.begin(), word.end());
      parts.push_back(to_utf8(word));
      i = j;
    }
  } else {
    std::string sep = arg_str(sep_value, "split");
    if (sep.empty()) throw Fault("empty separator");
    if (from_right) {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t at = end >= sep.size() ? s.rfind(sep, end - sep.size()) : std::string::npos;
        if (at == std::string::npos) break;
        parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
      }
      parts.push_back(s.substr(0, end));
    } else {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t at = s.find(sep, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep.size();
      }
      parts.push_back(s.substr(start));
    }
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::make_list(std::move(out));
}

std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string text = to_u32(s);
    int64_t n = 0;
    for (char32_t c : text) {
      if (count < 0 || n++ < count) out += with;
      out += to_utf8(std::u32string(1, c));
    }
    if (count < 0 || n < count) out += with;
    return out;
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + with;
    start = at + old.size();
  }
  return out + s.substr(start);
}

bool affix(const std::string& s, const Value& affixes, bool prefix) {
  auto test = [&](const Value& v) {
    std::string a = arg_str(v, prefix ? "startswith" : "endswith");
    return s.size() >= a.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0;
  };
  if (affixes.kind == K::kTuple)
    return std::any_of(affixes.list->items.begin(), affixes.list->items.end(), test);
  return test(affixes);
}

int64_t code_points(std::string_view s) { return static_cast<int64_t>(to_u32(s).size()); }

std::string ascii_case(std::string s, const std::string& method) {
  if (std::any_of(s.begin(), s.end(),
                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
    throw Fault("str." + method + "() of non-ASCII text is not supported by the renderer");
  }
  bool previous_cased = false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    bool upper = method == "upper" || (method == "capitalize" && i == 0) ||
                 (method == "title" && !previous_cased);
    s[i] = static_cast<char>(upper ? std::toupper(c) : std::tolower(c));
    previous_cased = std::isalpha(c) != 0;
  }
  return s;
}

Value str_method(const std::string& s, const std::string& name, CallArgs& args) {
  auto bind = [&](const std::vector<std::string_view>& names) { return args.bind(name, names); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(strip(s, bind({"chars"})[0], name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    std::vector<Value> a = bind({"sep", "maxsplit"});
    if (!a[1].is_undefined() && a[1].kind != K::kInt) throw Fault("maxsplit must be an integer");
    return split(s, a[0], a[1], name == "rsplit");
  }
  if (name == "startswith" || name == "endswith") {
    std::vector<Value> a = bind({"prefix", "start", "end"});
    if (!a[1].is_undefined() || !a[2].is_undefined()) {
      throw Fault("str." + name + "() with start or end is not supported by the renderer");
    }
    return Value::boolean(affix(s, a[0], name == "startswith"));
  }
  if (name == "replace") {
    std::vector<Value> a = bind({"old", "new", "count"});
    int64_t count = a[2].is_undefined() || a[2].kind == K::kNone ? -1 : a[2].i;
    return Value::string(replace(s, arg_str(a[0], name), arg_str(a[1], name), count));
  }
  if (name == "lower") {
    bind({});
    return Value::string(to_utf8(lowercase(to_u32(s), Flavor::kPython)));
  }
  if (name == "upper" || name == "title" || name == "capitalize") {
    bind({});
    return Value::string(ascii_case(s, name));
  }
  if (name == "find" || name == "count") {
    std::vector<Value> a = bind({"sub"});
    std::string sub = arg_str(a[0], name);
    if (name == "find") {
      size_t at = s.find(sub);
      return Value::integer(
          at == std::string::npos ? -1 : code_points(std::string_view(s).substr(0, at)));
    }
    if (sub.empty()) return Value::integer(code_points(s) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : iterate(bind({"iterable"})[0])) {
      if (item.kind != K::kString) {
        throw Fault(std::string("sequence item: expected str instance, ") + type_name(item) +
                    " found");
      }
      out += (first ? "" : s) + item.s;
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string a = arg_str(bind({"affix"})[0], name);
    bool prefix = name == "removeprefix";
    if (!affix(s, Value::string(a), prefix)) return Value::string(s);
    return Value::string(prefix ? s.substr(a.size()) : s.substr(0, s.size() - a.size()));
  }
  if (name == "isspace" || name == "isdigit") {
    bind({});
    std::u32string text = to_u32(s);
    auto pred = [&](char32_t c) {
      return name == "isspace" ? is_python_space(c) : (c >= '0' && c <= '9');
    };
    if (name == "isdigit" &&
        std::any_of(text.begin(), text.end(), [](char32_t c) { return c >= 0x80; })) {
      throw Fault("str.isdigit() of non-ASCII text is not supported by the renderer");
    }
    return Value::boolean(!text.empty() && std::all_of(text.begin(), text.end(), pred));
  }
  throw Fault("method str." + name + "() is not supported by the renderer");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  if (name == "get") {
    std::vector<Value> a = args.bind(name, {"key", "default"});
    const Value* v = a[0].kind == K::kString ? self.dict->find(a[0].s) : nullptr;
    return v ? *v : a[1].is_undefined() ? Value::none() : a[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    args.bind(name, {});
    std::vector<Value> out;
    for (const auto& [k, v] : self.dict->items) {
      out.push_back(name == "keys"     ? Value::string(k)
                    : name == "values" ? v
                                       : Value::make_list({Value::string(k), v}, K::kTuple));
    }
    Value view = Value::make_list(std::move(out));
    view.list->view = "dict_" + name;
    return view;
  }
  throw Fault("method dict." + name + "() is not supported by the renderer");
}

Value raise_exception(CallArgs& args) {
  throw Raised(to_str(args.bind("raise_exception", {"message"})[0]));
}

Value strftime_now(CallArgs& args) {
  Value format = args.bind("strftime_now", {"format"})[0];
  if (format.kind != K::kString) throw Fault("strftime_now() argument must be str");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + format.s.size() * 8, '\0');
  size_t n = std::strftime(out.data(), out.size(), format.s.c_str(), &local);
  out.resize(n);
  return Value::string(std::move(out));
}

// dict(mapping or pairs, **kwargs), the body of both dict() and namespace().
Value make_mapping(CallArgs& args, K kind) {
  if (args.positional.size() > 1) throw Fault("dict expected at most 1 argument");
  Value out = Value::make_dict(kind);
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.kind == K::kDict || source.kind == K::kNamespace) {
      for (const auto& [k, v] : source.dict->items) out.dict->set(k, v);
    } else {
      for (const Value& pair : iterate(source)) {
        if (!pair.is_sequence() || pair.list->items.size() != 2 ||
            pair.list->items[0].kind != K::kString) {
          throw Fault("dict() needs pairs of a string key and a value");
        }
        out.dict->set(pair.list->items[0].s, pair.list->items[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) out.dict->set(k, v);
  if (kind == K::kNamespace) {
    for (const auto& [k, v] : out.dict->items) {
      if (!k.empty() && k[0] == '_') {
        throw Fault(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
            k + "'");
      }
    }
  }
  return out;
}

Value range(CallArgs& args) {
  if (!args.keyword.empty()) throw Fault("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const Value& v : args.positional) {
    if (v.kind != K::kInt && v.kind != K::kBool)
      throw Fault(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer");
    n.push_back(v.kind == K::kBool ? v.b : v.i);
  }
  if (n.empty() || n.size() > 3) throw Fault("range expected 1 to 3 arguments");
  int64_t start = n.size() == 1 ? 0 : n[0];
  int64_t stop = n.size() == 1 ? n[0] : n[1];
  int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) throw Fault("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000) {
      throw Fault("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::integer(i));
  }
  return Value::make_list(std::move(out));
}

}  // namespace

bool has_method(const Value& self, const std::string& name) {
  switch (self.kind) {
    case K::kString: return kStrMethods.count(name) > 0;
    case K::kList: return kListMethods.count(name) > 0;
    case K::kTuple: return kTupleMethods.count(name) > 0;
    case K::kDict: return kDictMethods.count(name) > 0;
    default: return false;
  }
}

Value bound_method(const Value& self, const std::string& name) {
  std::string type = type_name(self);
  if (kMutating.count(name)) {
    return Value::function(type + "." + name, [name, type](CallArgs&) -> Value {
      throw Fault("access to attribute '" + name + "' of '" + type +
                  "' object is unsafe (the sandbox forbids changing it)");
    });
  }
  return Value::function(type + "." + name, [self, name](CallArgs& args) -> Value {
    if (self.kind == K::kString) return str_method(self.s, name, args);
    if (self.kind == K::kDict) return dict_method(self, name, args);
    throw Fault("method " + std::string(type_name(self)) + "." + name +
                "() is not supported by the renderer");
  });
}

Value global_function(const std::string& name) {
  if (name == "raise_exception") return Value::function(name, raise_exception);
  if (name == "strftime_now") return Value::function(name, strftime_now);
  if (name == "range") return Value::function(name, range);
  if (name == "dict")
    return Value::function(name, [](CallArgs& a) { return make_mapping(a, K::kDict); });
  if (name == "namespace") {
    return Value::function(name, [](CallArgs& a) { return make_mapping(a, K::kNamespace); });
  }
  if (name == "lipsum" || name == "cycler" || name == "joiner") {
    return Value::function(name, [name](CallArgs&) -> Value {
      throw Fault("function '" + name + "' is not supported by the renderer");
    });
  }
  return Value::undefined(name);
}

}  // namespace shardformer::tokenizer::detail::jinja
