// Internals of the chat-template renderer: the Value type of the template language, the syntax
// tree the parser builds, and the builtins (filters, tests, methods) the evaluator calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardformer::tokenizer::detail {

namespace jinja {

// A runtime error of the template; the evaluator adds the origin, line and column.
class Fault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Value;
struct ListData;
struct DictData;
struct IteratorData;
struct Function;

// One value as the template sees it: Python's None, bool, int, float, str, list, tuple and dict,
// jinja2's Undefined and namespace(), a one-pass iterator (what select, map and reverse return)
// and functions (globals, bound methods, macros).
struct Value {
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kIterator,
    kFunction
  };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;  // a string, or the name of an undefined value
  std::shared_ptr<ListData> list;
  std::shared_ptr<DictData> dict;  // a dict or a namespace
  std::shared_ptr<IteratorData> iter;
  std::shared_ptr<const Function> fn;

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value make_list(std::vector<Value> items, Kind kind = Kind::kList);
  static Value make_dict(Kind kind = Kind::kDict);
  static Value iterator(std::vector<Value> items);
  static Value function(std::string name, std::function<Value(struct CallArgs&)> call);

  bool is(Kind k) const { return kind == k; }
  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_number() const {
    return kind == Kind::kBool || kind == Kind::kInt || kind == Kind::kFloat;
  }
  bool is_sequence() const { return kind == Kind::kList || kind == Kind::kTuple; }
  bool is_mapping() const { return kind == Kind::kDict; }
};

struct ListData {
  std::vector<Value> items;
  std::string view;  // "dict_keys" etc. for what dict.keys/values/items() return, printed so
};

struct DictData {
  std::vector<std::pair<std::string, Value>> items;  // in insertion order, like Python's dict
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

// A Python iterator: consumed as it is read (`g|first` then `g|list` gives the rest).
struct IteratorData {
  std::vector<Value> items;
  size_t pos = 0;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Binds arguments to `names` in order (Python-style); missing ones are kUndefined with an empty
  // name so that callers can fill defaults. Throws Fault on unknown or duplicate keywords and on
  // too many positional arguments.
  std::vector<Value> bind(std::string_view callee,
                          const std::vector<std::string_view>& names) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

// ---- values (chat_template_value.cpp, printing in chat_template_print.cpp) ----
Value from_json(const nlohmann::ordered_json& json);
const char* type_name(const Value& v);  // Python's type name, for messages
bool truthy(const Value& v);
std::string to_str(const Value& v);   // Python str()
std::string to_repr(const Value& v);  // Python repr()
struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);  // Python json.dumps()
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // Python <, for sortable pairs; else throws
Value binary_op(std::string_view op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
std::vector<Value> iterate(const Value& v);  // Python iter(), consuming an iterator
int64_t length(const Value& v);              // Python len()
Value get_item(const Value& obj, const Value& key);
Value get_attr(const Value& obj, const std::string& name);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);
[[noreturn]] void fail_undefined(const Value& v);

// The template's own raise_exception(message).
class Raised : public Fault {
 public:
  using Fault::Fault;
};

// ---- filters and tests (chat_template_filters.cpp) ----
// Whether jinja2 knows the filter/test: supported ones return true; known but unsupported ones
// and unknown ones throw Fault naming them.
void check_filter(const std::string& name);
void check_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);

// ---- methods and globals (chat_template_methods.cpp) ----
// A method of a str, list, tuple or dict (`s.strip()`, `d.items()`), bound to `self`; has_method
// says whether Python has it, and calling one the renderer lacks throws.
Value bound_method(const Value& self, const std::string& name);
bool has_method(const Value& self, const std::string& name);
// The globals of HF's environment (raise_exception, strftime_now, namespace, dict, range...), or
// an undefined value for another name.
Value global_function(const std::string& name);

}  // namespace jinja

// ---- syntax tree (chat_template_parser.cpp) ----
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args
    kTuple,    // args
    kDict,     // args: key, value, key, value...
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null where omitted)
    kCall,     // args[0](args[1:], keywords)
    kFilter,   // args[0] | name(args[1:], keywords)
    kTest,     // args[0] is name(args[1:], keywords); negated for `is not`
    kUnary,    // name args[0]: "-", "+", "not"
    kBinary,   // args[0] name args[1]: + - * / // % ** ~ and or
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2]...
    kCond,     // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int col = 0;
  jinja::Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;
};

struct TemplateNode;
using TemplateNodePtr = std::unique_ptr<TemplateNode>;

struct TemplateNode {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // if expr: body, else: orelse (elif nests an kIf in orelse)
    kFor,       // for targets in expr [if filter]: body, else: orelse
    kSet,       // set targets = expr, or set targets[0].attr = expr
    kSetBlock,  // set targets[0]: body
    kMacro,     // macro name(params = defaults): body
    kBreak,
    kContinue,
    kBody,  // body (generation blocks)
  };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;  // text, macro name, attribute of `set ns.attr`
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per parameter, null where none
  std::vector<TemplateNodePtr> body;
  std::vector<TemplateNodePtr> orelse;
};

struct TemplateBody {
  std::string origin;
  std::vector<TemplateNodePtr> nodes;
};

// ---- lexer (chat_template_lexer.cpp) ----
struct Token {
  enum class Kind {
    kText,
    kVariableBegin,
    kVariableEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOperator,
    kEnd
  };
  Kind kind;
  std::string text;  // data, name, operator or decoded string
  int line = 0;
  int col = 0;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Splits a template into tokens as jinja2's lexer does with trim_blocks and lstrip_blocks:
// newlines normalized, one trailing newline dropped, whitespace control applied to the text,
// comments dropped, raw blocks turned into text.
std::vector<Token> tokenize(std::string_view source, const std::string& origin);

std::vector<TemplateNodePtr> parse_template(std::string_view source, const std::string& origin);

// "origin:line:col: message", the form of every error of the renderer.
[[noreturn]] void throw_error(const std::string& origin, int line, int col,
                              const std::string& message);

}  // namespace shardformer::tokenizer::detail
