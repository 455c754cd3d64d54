// Values of the chat-template renderer with Python's semantics: construction from JSON,
// truthiness, comparisons, arithmetic, iteration, and jinja2's item and attribute lookup.
#include "chat_template_internal.h"

#include <algorithm>
#include <cmath>

namespace shardformer::tokenizer::detail::jinja {

using K = Value::Kind;

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = K::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind = K::kBool;
  v.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind = K::kInt;
  v.i = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind = K::kFloat;
  v.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = K::kString;
  v.s = std::move(s);
  return v;
}
Value Value::make_list(std::vector<Value> items, Kind kind) {
  Value v;
  v.kind = kind;
  v.list = std::make_shared<ListData>();
  v.list->items = std::move(items);
  return v;
}
Value Value::make_dict(Kind kind) {
  Value v;
  v.kind = kind;
  v.dict = std::make_shared<DictData>();
  return v;
}
Value Value::iterator(std::vector<Value> items) {
  Value v;
  v.kind = K::kIterator;
  v.iter = std::make_shared<IteratorData>();
  v.iter->items = std::move(items);
  return v;
}
Value Value::function(std::string name, std::function<Value(CallArgs&)> call) {
  Value v;
  v.kind = K::kFunction;
  v.fn = std::make_shared<Function>(Function{std::move(name), std::move(call)});
  return v;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

std::vector<Value> CallArgs::bind(std::string_view callee,
                                  const std::vector<std::string_view>& names) const {
  if (positional.size() > names.size()) {
    throw Fault(std::string(callee) + "() takes at most " + std::to_string(names.size()) +
                " arguments (" + std::to_string(positional.size()) + " given)");
  }
  std::vector<Value> bound(names.size());
  std::vector<bool> set(names.size(), false);
  for (size_t i = 0; i < positional.size(); ++i) {
    bound[i] = positional[i];
    set[i] = true;
  }
  for (const auto& [key, value] : keyword) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      throw Fault(std::string(callee) + "() got an unexpected keyword argument '" + key + "'");
    }
    size_t index = it - names.begin();
    if (set[index]) throw Fault(std::string(callee) + "() got multiple values for '" + key + "'");
    bound[index] = value;
    set[index] = true;
  }
  return bound;
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    char32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    bool ok = n >= 0;
    for (int k = 1; ok && k <= n; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 2) {
        ok = false;
      } else {
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
    }
    if (!ok) {
      out += U'\uFFFD';
      ++i;
    } else {
      out += cp;
      i += n + 1;
    }
  }
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

void fail_undefined(const Value& v) {
  throw Fault(v.s.empty() ? "a value is undefined" : "'" + v.s + "' is undefined");
}

Value from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        throw Fault("integer " + json.dump() + " is too large for the renderer");
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& item : json) items.push_back(from_json(item));
      return Value::make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::make_dict();
      for (const auto& [key, item] : json.items()) d.dict->items.emplace_back(key, from_json(item));
      return d;
    }
    default:
      throw Fault("a " + std::string(json.type_name()) + " value is not supported by the renderer");
  }
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case K::kUndefined: return "Undefined";
    case K::kNone: return "NoneType";
    case K::kBool: return "bool";
    case K::kInt: return "int";
    case K::kFloat: return "float";
    case K::kString: return "str";
    case K::kList: return "list";
    case K::kTuple: return "tuple";
    case K::kDict: return "dict";
    case K::kNamespace: return "Namespace";
    case K::kIterator: return "generator";
    case K::kFunction: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case K::kUndefined:
    case K::kNone: return false;
    case K::kBool: return v.b;
    case K::kInt: return v.i != 0;
    case K::kFloat: return v.f != 0.0;
    case K::kString: return !v.s.empty();
    case K::kList:
    case K::kTuple: return !v.list->items.empty();
    case K::kDict: return !v.dict->items.empty();
    default: return true;  // namespaces, iterators and functions, as in Python
  }
}

namespace {

double as_double(const Value& v) {
  return v.kind == K::kFloat  ? v.f
         : v.kind == K::kBool ? (v.b ? 1.0 : 0.0)
                              : static_cast<double>(v.i);
}
int64_t as_int(const Value& v) { return v.kind == K::kBool ? (v.b ? 1 : 0) : v.i; }
bool is_intlike(const Value& v) { return v.kind == K::kInt || v.kind == K::kBool; }

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  throw Fault("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) +
              "' and '" + type_name(b) + "'");
}

Value checked(bool overflow, int64_t result) {
  if (overflow)
    throw Fault("integer overflow: integers beyond 64 bits are not supported by the renderer");
  return Value::integer(result);
}

Value repeat(const Value& seq, int64_t n) {
  n = std::max<int64_t>(n, 0);
  size_t unit = seq.kind == K::kString ? seq.s.size() : seq.list->items.size();
  if (unit && static_cast<uint64_t>(n) > (size_t{1} << 28) / unit)
    throw Fault("repetition result too large for the renderer");
  if (seq.kind == K::kString) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.s;
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.list->items.begin(), seq.list->items.end());
  return Value::make_list(std::move(out), seq.kind);
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.s == b.s;
    case K::kList:
    case K::kTuple:
      return a.list->items.size() == b.list->items.size() &&
             std::equal(a.list->items.begin(), a.list->items.end(), b.list->items.begin(), equals);
    case K::kDict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, value] : a.dict->items) {
        const Value* other = b.dict->find(key);
        if (!other || !equals(value, *other)) return false;
      }
      return true;
    }
    case K::kNamespace: return a.dict == b.dict;
    case K::kIterator: return a.iter == b.iter;
    default: return a.fn == b.fn;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b);
    double x = as_double(a);
    double y = as_double(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == K::kString && b.kind == K::kString) return a.s < b.s ? -1 : a.s > b.s;
  if (a.kind == b.kind && a.is_sequence()) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  throw Fault(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" +
              type_name(b) + "'");
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(to_str(a) + to_str(b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool ints = is_intlike(a) && is_intlike(b);
  bool nums = a.is_number() && b.is_number();
  int64_t x = ints ? as_int(a) : 0;
  int64_t y = ints ? as_int(b) : 0;
  int64_t r = 0;
  if (op == "+") {
    if (ints) {
      bool overflow = __builtin_add_overflow(x, y, &r);
      return checked(overflow, r);
    }
    if (nums) return Value::floating(as_double(a) + as_double(b));
    if (a.kind == K::kString && b.kind == K::kString) return Value::string(a.s + b.s);
    if (a.is_sequence() && a.kind == b.kind) {
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      return Value::make_list(std::move(items), a.kind);
    }
  } else if (op == "-") {
    if (ints) {
      bool overflow = __builtin_sub_overflow(x, y, &r);
      return checked(overflow, r);
    }
    if (nums) return Value::floating(as_double(a) - as_double(b));
  } else if (op == "*") {
    if (ints) {
      bool overflow = __builtin_mul_overflow(x, y, &r);
      return checked(overflow, r);
    }
    if (nums) return Value::floating(as_double(a) * as_double(b));
    if ((a.kind == K::kString || a.is_sequence()) && is_intlike(b)) return repeat(a, as_int(b));
    if ((b.kind == K::kString || b.is_sequence()) && is_intlike(a)) return repeat(b, as_int(a));
  } else if (op == "/" || op == "//" || op == "%") {
    if (a.kind == K::kString && op == "%") {
      throw Fault("string formatting with '%' is not supported by the renderer");
    }
    if (nums) {
      if (as_double(b) == 0.0)
        throw Fault(ints ? "integer division or modulo by zero" : "float division by zero");
      if (op == "/") return Value::floating(as_double(a) / as_double(b));
      if (ints) {
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == "//" ? q : m);
      }
      double fx = as_double(a);
      double fy = as_double(b);
      double m = std::fmod(fx, fy);
      if (m != 0.0 && ((m < 0) != (fy < 0))) m += fy;
      if (op == "%") return Value::floating(m);
      double div = (fx - m) / fy;
      double floor_div = std::floor(div);
      if (div - floor_div > 0.5) floor_div += 1.0;
      return Value::floating(floor_div);
    }
  } else if (op == "**") {
    if (ints && y >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return checked(true, 0);
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    if (nums) return Value::floating(std::pow(as_double(a), as_double(b)));
  }
  unsupported_operands(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case K::kString:
      if (item.kind != K::kString) {
        throw Fault(std::string("'in <string>' requires string as left operand, not ") +
                    type_name(item));
      }
      return container.s.find(item.s) != std::string::npos;
    case K::kList:
    case K::kTuple:
      return std::any_of(container.list->items.begin(), container.list->items.end(),
                         [&](const Value& v) { return equals(v, item); });
    case K::kDict: return item.kind == K::kString && container.dict->find(item.s) != nullptr;
    case K::kIterator: {
      auto& it = *container.iter;
      while (it.pos < it.items.size()) {
        if (equals(it.items[it.pos++], item)) return true;
      }
      return false;
    }
    case K::kUndefined: return false;
    default:
      throw Fault(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case K::kUndefined: return {};
    case K::kList:
    case K::kTuple: return v.list->items;
    case K::kString: {
      std::vector<Value> out;
      for (char32_t c : to_u32(v.s)) out.push_back(Value::string(to_utf8(std::u32string(1, c))));
      return out;
    }
    case K::kDict: {
      std::vector<Value> out;
      for (const auto& item : v.dict->items) out.push_back(Value::string(item.first));
      return out;
    }
    case K::kIterator: {
      auto& it = *v.iter;
      std::vector<Value> out(it.items.begin() + it.pos, it.items.end());
      it.pos = it.items.size();
      return out;
    }
    default: throw Fault(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case K::kUndefined: return 0;
    case K::kString: return static_cast<int64_t>(to_u32(v.s).size());
    case K::kList:
    case K::kTuple: return static_cast<int64_t>(v.list->items.size());
    case K::kDict: return static_cast<int64_t>(v.dict->items.size());
    default: throw Fault(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (has_method(obj, name)) return bound_method(obj, name);
  if (obj.kind == K::kDict || obj.kind == K::kNamespace) {
    const Value* v = obj.dict->find(name);
    if (v) return *v;
  }
  return Value::undefined(name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if ((obj.kind == K::kDict || obj.kind == K::kNamespace) && key.kind == K::kString) {
    const Value* v = obj.dict->find(key.s);
    if (v) return *v;
  }
  if ((obj.kind == K::kString || obj.is_sequence()) && is_intlike(key)) {
    int64_t n = length(obj);
    int64_t index = as_int(key) < 0 ? as_int(key) + n : as_int(key);
    if (index < 0 || index >= n) return Value::undefined(to_str(key));
    if (obj.kind == K::kString)
      return Value::string(to_utf8(std::u32string(1, to_u32(obj.s)[index])));
    return obj.list->items[index];
  }
  if (key.kind == K::kString) {
    // jinja2 falls back to the attribute: d['items'] is the method when there is no such key.
    if (has_method(obj, key.s)) return bound_method(obj, key.s);
    return Value::undefined(key.s);
  }
  return Value::undefined(to_str(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  // jinja2 compiles a slice to Python's own obj[a:b:c], without its lenient item lookup.
  if (obj.is_undefined()) fail_undefined(obj);
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_undefined() && v->kind != K::kNone && !is_intlike(*v)) {
      throw Fault("slice indices must be integers or None");
    }
  }
  if (obj.kind != K::kString && !obj.is_sequence()) {
    throw Fault(std::string("'") + type_name(obj) + "' object is not subscriptable");
  }
  auto given = [](const Value& v) { return !v.is_undefined() && v.kind != K::kNone; };
  int64_t st = given(step) ? as_int(step) : 1;
  if (st == 0) throw Fault("slice step cannot be zero");
  std::u32string chars = obj.kind == K::kString ? to_u32(obj.s) : std::u32string();
  int64_t n = obj.kind == K::kString ? static_cast<int64_t>(chars.size()) : length(obj);
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t i = as_int(v);
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t from = clamp(start, st > 0 ? 0 : n - 1);
  int64_t to = clamp(stop, st > 0 ? n : -1);
  std::vector<int64_t> indices;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) indices.push_back(i);
  if (obj.kind == K::kString) {
    std::u32string out;
    for (int64_t i : indices) out += chars[i];
    return Value::string(to_utf8(out));
  }
  std::vector<Value> out;
  for (int64_t i : indices) out.push_back(obj.list->items[i]);
  return Value::make_list(std::move(out), obj.kind);
}

}  // namespace shardformer::tokenizer::detail::jinja
