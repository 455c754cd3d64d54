// Parser of the chat-template renderer: turns the lexer's tokens into the syntax tree, following
// jinja2's grammar (operator precedence, filters and tests, for/if/set/macro statements).
#include "chat_template_internal.h"

#include <set>

namespace shardformer::tokenizer::detail {
namespace {

using TK = Token::Kind;
using EK = Expr::Kind;
using NK = TemplateNode::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin)
      : tokens_(std::move(tokens)), origin_(origin) {}

  std::vector<TemplateNodePtr> run() {
    std::vector<TemplateNodePtr> nodes = parse_body({});
    if (cur().kind != TK::kEnd) {
      fail("unexpected '" + cur().text + "' tag: it closes no open block");
    }
    return nodes;
  }

 private:
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(std::string_view op) const { return cur().kind == TK::kOperator && cur().text == op; }
  bool is_name(std::string_view name) const {
    return cur().kind == TK::kName && cur().text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::kEnd: return "end of template";
      case TK::kVariableEnd: return "end of print statement ('}}')";
      case TK::kBlockEnd: return "end of statement block ('%}')";
      case TK::kString: return "string";
      case TK::kText: return "template text";
      default: return "'" + t.text + "'";
    }
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw_error(origin_, cur().line, cur().col, message);
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect(TK kind, std::string_view what) {
    if (cur().kind != kind) fail("expected " + std::string(what) + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().kind != TK::kName) fail("expected a name, got " + describe(cur()));
    return next().text;
  }

  ExprPtr make(EK kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  ExprPtr make2(EK kind, std::string name, ExprPtr a, ExprPtr b) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = a->line;
    e->col = a->col;
    e->name = std::move(name);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  TemplateNodePtr make_node(NK kind, const Token& at) {
    auto n = std::make_unique<TemplateNode>();
    n->kind = kind;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  // ---- statements ----

  // Parses nodes until a `{% name %}` with a name in `end_tags` (left at that name) or the end.
  std::vector<TemplateNodePtr> parse_body(const std::set<std::string>& end_tags) {
    std::vector<TemplateNodePtr> nodes;
    while (cur().kind != TK::kEnd) {
      const Token& t = cur();
      if (t.kind == TK::kText) {
        TemplateNodePtr n = make_node(NK::kText, t);
        n->text = next().text;
        nodes.push_back(std::move(n));
      } else if (t.kind == TK::kVariableBegin) {
        TemplateNodePtr n = make_node(NK::kOutput, next());
        n->expr = parse_tuple(true, {});
        expect(TK::kVariableEnd, "end of print statement ('}}')");
        nodes.push_back(std::move(n));
      } else if (t.kind == TK::kBlockBegin) {
        if (peek().kind == TK::kName && end_tags.count(peek().text)) {
          next();
          return nodes;
        }
        next();
        nodes.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
    return nodes;
  }

  // Parses a block's body up to one of `end_tags`, failing at the end of the template.
  std::vector<TemplateNodePtr> parse_block(const std::set<std::string>& end_tags,
                                           const Token& opener) {
    std::vector<TemplateNodePtr> body = parse_body(end_tags);
    if (cur().kind == TK::kEnd) {
      throw_error(origin_, opener.line, opener.col,
                  "unexpected end of template: this '" + opener.text +
                      "' block is missing its {% end" + opener.text + " %}");
    }
    return body;
  }

  void end_tag() { expect(TK::kBlockEnd, "end of statement block ('%}')"); }

  TemplateNodePtr parse_statement() {
    if (cur().kind != TK::kName) fail("expected a statement name, got " + describe(cur()));
    const Token& t = cur();
    static const std::set<std::string> kRefused = {
        "call",  "filter", "with",  "include",    "import",    "from",    "extends",
        "block", "do",     "trans", "autoescape", "pluralize", "endblock"};
    if (t.text == "if") return parse_if(next());
    if (t.text == "for") return parse_for(next());
    if (t.text == "set") return parse_set(next());
    if (t.text == "macro") return parse_macro(next());
    if (t.text == "generation") {
      TemplateNodePtr n = make_node(NK::kBody, t);
      const Token& opener = next();
      end_tag();
      n->body = parse_block({"endgeneration"}, opener);
      next();
      end_tag();
      return n;
    }
    if (t.text == "break" || t.text == "continue") {
      if (loop_depth_ == 0) fail("'" + t.text + "' outside of a loop");
      TemplateNodePtr n = make_node(t.text == "break" ? NK::kBreak : NK::kContinue, next());
      end_tag();
      return n;
    }
    if (kRefused.count(t.text)) fail("statement '" + t.text + "' is not supported by the renderer");
    fail("unknown statement tag '" + t.text + "' (or a closing tag with no open block)");
  }

  TemplateNodePtr parse_if(const Token& opener) {
    TemplateNodePtr n = make_node(NK::kIf, opener);
    n->expr = parse_tuple(true, {});
    end_tag();
    n->body = parse_block({"elif", "else", "endif"}, opener);
    const Token& tag = next();
    if (tag.text == "elif") {
      Token as_if = tag;
      as_if.text = "if";
      n->orelse.push_back(parse_if(as_if));
      return n;
    }
    if (tag.text == "else") {
      end_tag();
      n->orelse = parse_block({"endif"}, opener);
      next();
    }
    end_tag();
    return n;
  }

  std::vector<std::string> parse_targets(bool allow_namespace, std::string* attribute) {
    std::vector<std::string> names;
    bool parens = skip_op("(");
    do {
      names.push_back(expect_name());
      if (allow_namespace && names.size() == 1 && !parens && is_op(".")) {
        next();
        *attribute = expect_name();
        return names;
      }
    } while (skip_op(",") && cur().kind == TK::kName);
    if (parens) expect_op(")");
    return names;
  }

  TemplateNodePtr parse_for(const Token& opener) {
    TemplateNodePtr n = make_node(NK::kFor, opener);
    n->targets = parse_targets(false, nullptr);
    if (!skip_name("in")) fail("expected 'in' in the for statement, got " + describe(cur()));
    n->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) n->filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive loops are not supported by the renderer");
    end_tag();
    ++loop_depth_;
    n->body = parse_block({"else", "endfor"}, opener);
    --loop_depth_;
    if (next().text == "else") {
      end_tag();
      n->orelse = parse_block({"endfor"}, opener);
      next();
    }
    end_tag();
    return n;
  }

  TemplateNodePtr parse_set(const Token& opener) {
    TemplateNodePtr n = make_node(NK::kSet, opener);
    std::string attribute;
    n->targets = parse_targets(true, &attribute);
    n->text = attribute;
    if (skip_op("=")) {
      n->expr = parse_tuple(true, {});
      end_tag();
      return n;
    }
    if (n->targets.size() != 1 || !attribute.empty()) fail("expected '=' in the set statement");
    if (is_op("|"))
      fail("filtered block set ({% set x | filter %}) is not supported by the renderer");
    end_tag();
    n->kind = NK::kSetBlock;
    n->body = parse_block({"endset"}, opener);
    next();
    end_tag();
    return n;
  }

  TemplateNodePtr parse_macro(const Token& opener) {
    TemplateNodePtr n = make_node(NK::kMacro, opener);
    n->text = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!n->params.empty()) expect_op(",");
      if (skip_op(")")) break;
      const Token& param = cur();
      n->params.push_back(expect_name());
      if (skip_op("=")) {
        n->defaults.push_back(parse_expression(true));
      } else {
        if (!n->defaults.empty() && n->defaults.back()) {
          throw_error(origin_, param.line, param.col,
                      "non-default argument follows default argument");
        }
        n->defaults.push_back(nullptr);
      }
    }
    end_tag();
    int saved_depth = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_block({"endmacro"}, opener);
    loop_depth_ = saved_depth;
    next();
    if (cur().kind == TK::kName && cur().text == n->text) next();
    end_tag();
    return n;
  }

  // ---- expressions ----

  bool is_tuple_end(const std::set<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.kind == TK::kVariableEnd || t.kind == TK::kBlockEnd || t.kind == TK::kEnd) return true;
    if (t.kind == TK::kOperator && t.text == ")") return true;
    return t.kind == TK::kName && extra_end.count(t.text);
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::set<std::string>& extra_end,
                      bool explicit_parentheses = false) {
    const Token& start = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("expected an expression, got " + describe(cur()));
    }
    ExprPtr e = make(EK::kTuple, start);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto e = make(EK::kCond, cur());
      e->line = expr->line;
      e->col = expr->col;
      e->args.push_back(parse_or());
      e->args.push_back(std::move(expr));
      e->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = make2(EK::kBinary, "or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = make2(EK::kBinary, "and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      ExprPtr e = make(EK::kUnary, next());
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr expr = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == TK::kOperator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && peek().kind == TK::kName && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(EK::kCompare, tokens_[pos_]);
        cmp->line = expr->line;
        cmp->col = expr->col;
        cmp->args.push_back(std::move(expr));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = make2(EK::kBinary, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = make2(EK::kBinary, "~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = make2(EK::kBinary, op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = make2(EK::kBinary, "**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(EK::kUnary, cur());
      node->name = next().text;
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    if (t.kind == TK::kName) {
      next();
      ExprPtr e = make(EK::kLiteral, t);
      if (t.text == "true" || t.text == "True") {
        e->value = jinja::Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = jinja::Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = jinja::Value::none();
      } else {
        e->kind = EK::kName;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == TK::kString) {
      ExprPtr e = make(EK::kLiteral, t);
      std::string s;
      while (cur().kind == TK::kString) s += next().text;
      e->value = jinja::Value::string(std::move(s));
      return e;
    }
    if (t.kind == TK::kInt || t.kind == TK::kFloat) {
      ExprPtr e = make(EK::kLiteral, next());
      e->value = t.kind == TK::kInt ? jinja::Value::integer(t.int_value)
                                    : jinja::Value::floating(t.float_value);
      return e;
    }
    if (skip_op("(")) {
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[") || is_op("{")) {
      bool is_dict = is_op("{");
      ExprPtr e = make(is_dict ? EK::kDict : EK::kList, next());
      std::string close = is_dict ? "}" : "]";
      while (!is_op(close)) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op(close)) break;
        }
        e->args.push_back(parse_expression(true));
        if (is_dict) {
          expect_op(":");
          e->args.push_back(parse_expression(true));
        }
      }
      next();
      return e;
    }
    fail("unexpected " + describe(t) + " in an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node), EK::kCall, "");
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        const Token& at = cur();
        std::string name = dotted_name();
        try {
          jinja::check_filter(name);
        } catch (const jinja::Fault& e) {
          throw_error(origin_, at.line, at.col, e.what());
        }
        node = is_op("(") ? parse_call(std::move(node), EK::kFilter, name)
                          : wrap(std::move(node), EK::kFilter, name);
        node->line = at.line;
        node->col = at.col;
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node), EK::kCall, "");
      } else {
        return node;
      }
    }
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().kind == TK::kName) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  ExprPtr wrap(ExprPtr node, EK kind, std::string name) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = node->line;
    e->col = node->col;
    e->name = std::move(name);
    e->args.push_back(std::move(node));
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    next();
    bool negated = skip_name("not");
    const Token& at = cur();
    std::string name = dotted_name();
    try {
      jinja::check_test(name);
    } catch (const jinja::Fault& e) {
      throw_error(origin_, at.line, at.col, e.what());
    }
    ExprPtr e;
    if (is_op("(")) {
      e = parse_call(std::move(node), EK::kTest, name);
    } else {
      e = wrap(std::move(node), EK::kTest, name);
      const Token& t = cur();
      bool arg_start =
          t.kind == TK::kString || t.kind == TK::kInt || t.kind == TK::kFloat || is_op("[") ||
          is_op("{") ||
          (t.kind == TK::kName && t.text != "else" && t.text != "or" && t.text != "and");
      if (arg_start) {
        if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
        e->args.push_back(parse_postfix(parse_primary()));
      }
    }
    e->negated = negated;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = cur();
      if (attr.kind == TK::kName) {
        ExprPtr e = wrap(std::move(node), EK::kAttr, next().text);
        return e;
      }
      if (attr.kind == TK::kInt) {
        ExprPtr e = wrap(std::move(node), EK::kItem, "");
        ExprPtr index = make(EK::kLiteral, next());
        index->value = jinja::Value::integer(attr.int_value);
        e->args.push_back(std::move(index));
        return e;
      }
      fail("expected a name or number after '.', got " + describe(attr));
    }
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) expect_op(",");
      ExprPtr first = is_op(":") ? nullptr : parse_expression(true);
      if (!is_op(":")) {
        items.push_back(std::move(first));
        continue;
      }
      if (!items.empty())
        fail("a slice with more than one dimension is not supported by the renderer");
      next();
      ExprPtr e = wrap(std::move(node), EK::kSlice, "");
      e->args.push_back(std::move(first));
      e->args.push_back(is_op("]") || is_op(":") ? nullptr : parse_expression(true));
      ExprPtr step;
      if (skip_op(":") && !is_op("]")) step = parse_expression(true);
      e->args.push_back(std::move(step));
      expect_op("]");
      return e;
    }
    next();
    if (items.empty()) fail("expected a subscript, got ']'");
    ExprPtr e = wrap(std::move(node), EK::kItem, "");
    if (items.size() == 1) {
      e->args.push_back(std::move(items[0]));
    } else {
      ExprPtr tuple = make(EK::kTuple, t);
      tuple->args = std::move(items);
      e->args.push_back(std::move(tuple));
    }
    return e;
  }

  // `(args, name=value)` after `node`: a call, or the arguments of a filter or test.
  ExprPtr parse_call(ExprPtr node, EK kind, std::string name) {
    ExprPtr e = wrap(std::move(node), kind, std::move(name));
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**"))
        fail("*args and **kwargs in calls are not supported by the renderer");
      if (cur().kind == TK::kName && peek().kind == TK::kOperator && peek().text == "=") {
        std::string key = next().text;
        next();
        e->keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e->keywords.empty()) fail("positional argument follows keyword argument");
        e->args.push_back(parse_expression(true));
      }
    }
    return e;
  }

  std::vector<Token> tokens_;
  const std::string& origin_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::vector<TemplateNodePtr> parse_template(std::string_view source, const std::string& origin) {
  return Parser(tokenize(source, origin), origin).run();
}

}  // namespace shardformer::tokenizer::detail
