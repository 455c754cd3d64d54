// Evaluator of the chat-template renderer and the ChatTemplate API: runs the syntax tree with
// jinja2's scoping (loops and macros open scopes, namespaces carry values out of loops).
#include "shardformer/tokenizer/chat_template.h"

#include "chat_template_internal.h"

#include <algorithm>

namespace shardformer::tokenizer {

namespace detail {
namespace {

using jinja::CallArgs;
using jinja::Fault;
using jinja::Value;
using K = Value::Kind;

constexpr int kMaxMacroDepth = 100;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    vars.emplace_back(name, std::move(value));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const TemplateBody& body) : body_(body) {}

  std::string run(const nlohmann::ordered_json& context) {
    auto root = std::make_shared<Scope>();
    std::string out;
    try {
      if (!context.is_object()) throw Fault("the context must be a JSON object of variables");
      for (const auto& [key, value] : context.items()) root->set(key, jinja::from_json(value));
      for (const char* name : {"tools", "documents"}) {
        if (!root->find(name)) root->set(name, Value::none());
      }
      if (!root->find("add_generation_prompt"))
        root->set("add_generation_prompt", Value::boolean(false));
      if (const Value* messages = root->find("messages"))
        root->set("messages", alias_reasoning(*messages));
      exec(body_.nodes, root, out);
    } catch (const jinja::Raised& e) {
      throw_error(body_.origin, line_, col_,
                  std::string("the template raised an exception: ") + e.what());
    } catch (const Fault& e) {
      throw_error(body_.origin, line_, col_, e.what());
    }
    return out;
  }

 private:
  // transformers' _alias_reasoning_fields: a message's reasoning under any of its names is
  // also passed as `thinking` (first) and `reasoning_content`.
  static Value alias_reasoning(const Value& messages) {
    if (messages.kind != K::kList) return messages;
    std::vector<Value> out;
    for (const Value& m : messages.list->items) {
      const Value* reasoning = nullptr;
      if (m.kind == K::kDict) {
        for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
          const Value* v = m.dict->find(field);
          if (v && v->kind != K::kNone) {
            reasoning = v;
            break;
          }
        }
      }
      if (!reasoning) {
        out.push_back(m);
        continue;
      }
      Value aliased = Value::make_dict();
      aliased.dict->set("thinking", *reasoning);
      for (const auto& [k, v] : m.dict->items) aliased.dict->set(k, v);
      aliased.dict->set("reasoning_content", *reasoning);
      out.push_back(std::move(aliased));
    }
    return Value::make_list(std::move(out));
  }

  void at(int line, int col) {
    line_ = line;
    col_ = col;
  }

  Flow exec(const std::vector<TemplateNodePtr>& nodes, const ScopePtr& scope, std::string& out) {
    for (const TemplateNodePtr& n : nodes) {
      Flow flow = exec_node(*n, scope, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_node(const TemplateNode& n, const ScopePtr& scope, std::string& out) {
    at(n.line, n.col);
    switch (n.kind) {
      case TemplateNode::Kind::kText: out += n.text; return Flow::kNormal;
      case TemplateNode::Kind::kOutput: {
        Value v = eval(*n.expr, scope);
        at(n.expr->line, n.expr->col);
        out += jinja::to_str(v);
        return Flow::kNormal;
      }
      case TemplateNode::Kind::kIf:
        return exec(jinja::truthy(eval(*n.expr, scope)) ? n.body : n.orelse, scope, out);
      case TemplateNode::Kind::kFor: return exec_for(n, scope, out);
      case TemplateNode::Kind::kSet: {
        Value v = eval(*n.expr, scope);
        at(n.line, n.col);
        if (!n.text.empty()) {
          set_attribute(n, scope, std::move(v));
        } else {
          assign(n.targets, std::move(v), *scope);
        }
        return Flow::kNormal;
      }
      case TemplateNode::Kind::kSetBlock: {
        std::string captured;
        exec(n.body, scope, captured);
        scope->set(n.targets[0], Value::string(std::move(captured)));
        return Flow::kNormal;
      }
      case TemplateNode::Kind::kMacro:
        scope->set(n.text, make_macro(n, scope));
        return Flow::kNormal;
      case TemplateNode::Kind::kBreak: return Flow::kBreak;
      case TemplateNode::Kind::kContinue: return Flow::kContinue;
      case TemplateNode::Kind::kBody: return exec(n.body, scope, out);
    }
    return Flow::kNormal;
  }

  void set_attribute(const TemplateNode& n, const ScopePtr& scope, Value v) {
    const Value* target = scope->find(n.targets[0]);
    if (!target || target->kind != K::kNamespace) {
      throw Fault("cannot assign attribute on non-namespace object '" + n.targets[0] + "'");
    }
    if (n.text[0] == '_') {
      throw Fault(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
          n.text + "'");
    }
    target->dict->set(n.text, std::move(v));
  }

  static void assign(const std::vector<std::string>& targets, Value v, Scope& scope) {
    if (targets.size() == 1) {
      scope.set(targets[0], std::move(v));
      return;
    }
    std::vector<Value> items = jinja::iterate(v);
    if (items.size() != targets.size()) {
      throw Fault(items.size() > targets.size()
                      ? "too many values to unpack (expected " + std::to_string(targets.size()) +
                            ")"
                      : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                            ", got " + std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], std::move(items[i]));
  }

  Flow exec_for(const TemplateNode& n, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*n.expr, scope);
    at(n.line, n.col);
    std::vector<Value> items;
    for (Value& item : jinja::iterate(iterable)) {
      if (n.filter) {
        ScopePtr s = child(scope);
        assign(n.targets, item, *s);
        if (!jinja::truthy(eval(*n.filter, s))) continue;
      }
      items.push_back(std::move(item));
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      ScopePtr s = child(scope);
      assign(n.targets, items[i], *s);
      Value loop = Value::make_dict();
      auto& d = *loop.dict;
      d.set("index", Value::integer(i + 1));
      d.set("index0", Value::integer(i));
      d.set("revindex", Value::integer(length - i));
      d.set("revindex0", Value::integer(length - i - 1));
      d.set("first", Value::boolean(i == 0));
      d.set("last", Value::boolean(i == length - 1));
      d.set("length", Value::integer(length));
      d.set("depth", Value::integer(1));
      d.set("depth0", Value::integer(0));
      d.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
      d.set("nextitem", i + 1 < length ? items[i + 1] : Value::undefined("there is no next item"));
      d.set("cycle", Value::function("loop.cycle", [i](CallArgs& a) {
              if (a.positional.empty()) throw Fault("no items for cycling given");
              return a.positional[i % a.positional.size()];
            }));
      s->set("loop", std::move(loop));
      if (exec(n.body, s, out) == Flow::kBreak) break;
    }
    if (length == 0) exec(n.orelse, child(scope), out);
    return Flow::kNormal;
  }

  Value make_macro(const TemplateNode& n, const ScopePtr& scope) {
    const TemplateNode* node = &n;
    // The scope holds the macro, so the macro holds it weakly (no cycle).
    std::weak_ptr<Scope> defining = scope;
    return Value::function(n.text, [this, node, defining](CallArgs& args) {
      ScopePtr scope = defining.lock();
      if (!scope)
        throw Fault("macro '" + node->text + "' called outside the scope it was defined in");
      if (++depth_ > kMaxMacroDepth)
        throw Fault("macro calls nested too deeply (endless recursion?)");
      if (args.positional.size() > node->params.size()) {
        throw Fault("macro '" + node->text + "' takes not more than " +
                    std::to_string(node->params.size()) + " argument(s)");
      }
      ScopePtr s = child(scope);
      std::vector<bool> given(node->params.size(), false);
      for (size_t i = 0; i < args.positional.size(); ++i) {
        s->set(node->params[i], args.positional[i]);
        given[i] = true;
      }
      for (const auto& [key, value] : args.keyword) {
        auto it = std::find(node->params.begin(), node->params.end(), key);
        if (it == node->params.end()) {
          throw Fault("macro '" + node->text + "' takes no keyword argument '" + key + "'");
        }
        s->set(key, value);
        given[it - node->params.begin()] = true;
      }
      for (size_t i = 0; i < node->params.size(); ++i) {
        if (given[i]) continue;
        s->set(node->params[i],
               node->defaults[i] ? eval(*node->defaults[i], s) : Value::undefined(node->params[i]));
      }
      std::string out;
      exec(node->body, s, out);
      --depth_;
      return Value::string(std::move(out));
    });
  }

  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i)
      args.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value, scope));
    return args;
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    at(e.line, e.col);
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* v = scope->find(e.name);
        return v ? *v : jinja::global_function(e.name);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value::make_list(std::move(items),
                                e.kind == Expr::Kind::kList ? K::kList : K::kTuple);
      }
      case Expr::Kind::kDict: {
        Value d = Value::make_dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = eval(*e.args[i], scope);
          if (key.kind != K::kString)
            throw Fault("dict keys other than strings are not supported by the renderer");
          d.dict->set(key.s, eval(*e.args[i + 1], scope));
        }
        return d;
      }
      case Expr::Kind::kAttr: {
        Value obj = eval(*e.args[0], scope);
        at(e.line, e.col);
        return jinja::get_attr(obj, e.name);
      }
      case Expr::Kind::kItem: {
        Value obj = eval(*e.args[0], scope);
        Value key = eval(*e.args[1], scope);
        at(e.line, e.col);
        return jinja::get_item(obj, key);
      }
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.args[0], scope);
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[i + 1]) parts[i] = eval(*e.args[i + 1], scope);
        }
        at(e.line, e.col);
        return jinja::slice(obj, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        Value callee = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        at(e.line, e.col);
        if (callee.is_undefined()) jinja::fail_undefined(callee);
        if (callee.kind != K::kFunction) {
          throw Fault(std::string("'") + jinja::type_name(callee) + "' object is not callable");
        }
        return callee.fn->call(args);
      }
      case Expr::Kind::kFilter: {
        Value input = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        at(e.line, e.col);
        return jinja::apply_filter(e.name, input, args);
      }
      case Expr::Kind::kTest: {
        Value input = eval(*e.args[0], scope);
        CallArgs args = eval_args(e, 1, scope);
        at(e.line, e.col);
        return Value::boolean(jinja::apply_test(e.name, input, args) != e.negated);
      }
      case Expr::Kind::kUnary: return eval_unary(e, eval(*e.args[0], scope));
      case Expr::Kind::kBinary: {
        Value left = eval(*e.args[0], scope);
        if (e.name == "and") return jinja::truthy(left) ? eval(*e.args[1], scope) : left;
        if (e.name == "or") return jinja::truthy(left) ? left : eval(*e.args[1], scope);
        Value right = eval(*e.args[1], scope);
        at(e.line, e.col);
        return jinja::binary_op(e.name, left, right);
      }
      case Expr::Kind::kCompare: return eval_compare(e, scope);
      case Expr::Kind::kCond:
        if (jinja::truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined();
    }
    return Value::undefined();
  }

  Value eval_unary(const Expr& e, const Value& v) {
    at(e.line, e.col);
    if (e.name == "not") return Value::boolean(!jinja::truthy(v));
    if (v.is_undefined()) jinja::fail_undefined(v);
    if (!v.is_number()) {
      throw Fault("bad operand type for unary " + e.name + ": '" + jinja::type_name(v) + "'");
    }
    if (e.name == "+") return v.kind == K::kBool ? Value::integer(v.b) : v;
    if (v.kind == K::kFloat) return Value::floating(-v.f);
    return jinja::binary_op("-", Value::integer(0), v);
  }

  Value eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.args[0], scope);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1], scope);
      at(e.line, e.col);
      const std::string& op = e.ops[i];
      bool ok = false;
      if (op == "==") {
        ok = jinja::equals(left, right);
      } else if (op == "!=") {
        ok = !jinja::equals(left, right);
      } else if (op == "in" || op == "not in") {
        ok = jinja::contains(right, left) == (op == "in");
      } else {
        int c = jinja::compare(left, right);
        ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
      }
      if (!ok) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  const TemplateBody& body_;
  int line_ = 1;
  int col_ = 1;
  int depth_ = 0;
};

}  // namespace
}  // namespace detail

ChatTemplate::ChatTemplate(std::shared_ptr<const detail::TemplateBody> body)
    : body_(std::move(body)) {}

ChatTemplate ChatTemplate::parse(std::string source, std::string origin) {
  auto body = std::make_shared<detail::TemplateBody>();
  body->origin = std::move(origin);
  body->nodes = detail::parse_template(source, body->origin);
  return ChatTemplate(std::move(body));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return detail::Renderer(*body_).run(context);
}

const std::string& ChatTemplate::origin() const { return body_->origin; }

}  // namespace shardformer::tokenizer
