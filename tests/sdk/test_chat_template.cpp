// Tests of ChatTemplate: every case of the build's test-data/chat_templates/reference.json
// (written by tools/gen_chat_template_reference.py with transformers' own renderer) renders to the
// same text or fails as it does; syntax errors and refused features name where and what.
#include "shardformer/tokenizer/chat_template.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "shardformer/error.h"
#include "test_env.h"

namespace shardformer::tokenizer {
namespace {

using nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The folder of the template files the cases name (tests/sdk/data).
std::string chat_reference_dir() { return shardformer::testing::source_dir() / "tests/sdk/data"; }

// The message of the ConfigError that `fn` throws, or a failure.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

TEST(ChatTemplate, MatchesTransformersOnReferenceCases) {
  ordered_json reference = ordered_json::parse(
      read_file(shardformer::testing::test_data_dir() / "chat_templates/reference.json"));
  const ordered_json& cases = reference.at("cases");
  ASSERT_GE(cases.size(), 200u);
  int rendered = 0;
  int failed_as_expected = 0;
  for (const ordered_json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    std::string source =
        c.contains("template_file")
            ? read_file(chat_reference_dir() + "/" + c.at("template_file").get<std::string>())
            : c.at("template").get<std::string>();
    try {
      ChatTemplate t = ChatTemplate::parse(source, name);
      std::string out = t.render(c.at("context"));
      if (c.contains("expected")) {
        EXPECT_EQ(out, c.at("expected").get<std::string>());
        ++rendered;
      } else {
        ADD_FAILURE() << "rendered, but transformers raised " << c.at("error") << ": "
                      << c.at("message");
      }
    } catch (const ConfigError& e) {
      if (!c.contains("error")) {
        ADD_FAILURE() << "unexpected error: " << e.what();
        continue;
      }
      std::string message = e.what();
      EXPECT_EQ(message.rfind(name + ":", 0), 0u) << message;
      if (c.at("error") == "TemplateError") {
        // raise_exception(): the template's own message comes through.
        EXPECT_NE(
            message.find("the template raised an exception: " + c.at("message").get<std::string>()),
            std::string::npos)
            << message;
      }
      ++failed_as_expected;
    }
  }
  EXPECT_EQ(rendered + failed_as_expected, static_cast<int>(cases.size()));
}

TEST(ChatTemplate, ErrorsNameOriginLineAndColumn) {
  struct Case {
    const char* source;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"{% if x %}\nabc", "t.json: chat_template:1:4:", "missing its {% endif %}"},
      {"{% for m in messages %}{{ m }}", "t.json: chat_template:1:4:", "missing its {% endfor %}"},
      {"ab\n  {{ x | frobnicate }}", "t.json: chat_template:2:10:", "no filter named 'frobnicate'"},
      {"{{ x | truncate(3) }}",
       "t.json: chat_template:1:8:", "filter 'truncate' is not supported by the renderer"},
      {"{{ x is escaped }}",
       "t.json: chat_template:1:9:", "test 'escaped' is not supported by the renderer"},
      {"{{ x is frob }}", "t.json: chat_template:1:9:", "no test named 'frob'"},
      {"\n\n{% include 'x.j2' %}",
       "t.json: chat_template:3:4:", "statement 'include' is not supported by the renderer"},
      {"{% frob %}", "t.json: chat_template:1:4:", "unknown statement tag 'frob'"},
      {"{% endif %}", "t.json: chat_template:1:4:", "unknown statement tag 'endif'"},
      {"{{ 'abc }}", "t.json: chat_template:1:4:", "unterminated string literal"},
      {"{{ x ", "t.json: chat_template:1:1:", "missing its '}}'"},
      {"a {# comment", "t.json: chat_template:1:3:", "missing end of comment tag"},
      {"{% raw %}abc", "t.json: chat_template:1:1:", "missing end of raw directive"},
      {"{{ (1 + 2 }}", "t.json: chat_template:1:11:", "unexpected '}', expected ')'"},
      {"{{ 1 + }}", "t.json: chat_template:1:8:", "unexpected end of print statement"},
      {"{% break %}", "t.json: chat_template:1:4:", "'break' outside of a loop"},
      {"{% for x in y recursive %}{% endfor %}",
       "t.json: chat_template:1:15:", "recursive loops are not supported"},
      {"{{ f(*args) }}",
       "t.json: chat_template:1:6:", "*args and **kwargs in calls are not supported"},
      {"{% set x | upper %}a{% endset %}", "t.json: chat_template:1:10:", "filtered block set"},
      {"{{ x $ y }}", "t.json: chat_template:1:6:", "unexpected character '$'"},
      {"{% macro m(a=1, b) %}{% endmacro %}",
       "t.json: chat_template:1:17:", "non-default argument follows default argument"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    std::string message = error_of([&] { ChatTemplate::parse(c.source, "t.json: chat_template"); });
    EXPECT_EQ(message.rfind(c.where, 0), 0u) << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
  }
}

TEST(ChatTemplate, RuntimeErrorsNameWhereAndWhat) {
  struct Case {
    const char* source;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"line1\n{{ raise_exception('Roles must alternate') }}",
       "x:2:4:", "the template raised an exception: Roles must alternate"},
      {"{{ messages[0].nope.deeper }}", "x:1:4:", "'nope' is undefined"},
      {"{{ messages | map('center') | list }}",
       "x:1:15:", "filter 'center' is not supported by the renderer"},
      {"{{ 'abc'.zfill(5) }}", "x:1:4:", "method str.zfill() is not supported by the renderer"},
      {"{{ 'a %s' % 1 }}", "x:1:4:", "string formatting with '%' is not supported by the renderer"},
      {"{{ cycler(1, 2) }}", "x:1:4:", "function 'cycler' is not supported by the renderer"},
      {"{{ [1].append(2) }}", "x:1:4:", "access to attribute 'append' of 'list' object is unsafe"},
      {"{{ 9223372036854775807 + 1 }}", "x:1:4:", "integers beyond 64 bits are not supported"},
      {"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "x:1:", "nested too deeply"},
      {"{{ range(1000000) | length }}", "x:1:4:", "Range too big"},
      {"{{ raise_exception }}",
       "x:1:4:", "printing a function object is not supported by the renderer"},
      {"{{ 'é' | upper }}", "x:1:", "non-ASCII text is not supported by the renderer"},
  };
  const ordered_json context = {
      {"messages", ordered_json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    ChatTemplate t = ChatTemplate::parse(c.source, "x");
    std::string message = error_of([&] { t.render(context); });
    EXPECT_EQ(message.rfind(c.where, 0), 0u) << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
  }
}

TEST(ChatTemplate, DefaultsOfTransformersVariables) {
  ChatTemplate t = ChatTemplate::parse(
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ nope is defined "
      "}}",
      "x");
  EXPECT_EQ(t.render(ordered_json::object()), "True True False False");
  EXPECT_EQ(t.render({{"add_generation_prompt", true}, {"tools", ordered_json::array()}}),
            "False True True False");
  EXPECT_THROW(t.render(ordered_json::array()), ConfigError);
}

TEST(ChatTemplate, StrftimeNowGivesTheDate) {
  ChatTemplate t = ChatTemplate::parse("{{ strftime_now('%Y-%m-%d') }}", "x");
  std::string out = t.render(ordered_json::object());
  ASSERT_EQ(out.size(), 10u) << out;
  EXPECT_EQ(out[4], '-');
  EXPECT_EQ(out[7], '-');
}

TEST(ChatTemplate, TemplatesAreReusableAndIndependent) {
  ChatTemplate t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ "
      "ns.n }}",
      "x");
  ordered_json two = {
      {"messages", ordered_json::array({ordered_json::object(), ordered_json::object()})}};
  EXPECT_EQ(t.render(two), "2");
  EXPECT_EQ(t.render(two), "2");
  ChatTemplate copy = t;
  EXPECT_EQ(copy.render({{"messages", ordered_json::array()}}), "0");
  EXPECT_EQ(copy.origin(), "x");
}

}  // namespace
}  // namespace shardformer::tokenizer
