// Untrusted templates: every runaway (recursion, loops, output, nesting, reference cycles)
// ends in a clear error value, never a crash, a hang or a leak.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "api/chat_template.h"
#include "api/chat_template_test_util.h"
#include "jinja/interp.h"

namespace spillway::api {
namespace {

using testing::render_or_error;

void expect_error_containing(const std::string& source, const std::string& needle) {
  const std::string out = render_or_error(source);
  EXPECT_EQ(out.rfind("ERROR: ", 0), 0u) << "rendered instead of failing: " << out.substr(0, 200);
  EXPECT_NE(out.find(needle), std::string::npos) << out;
}

TEST(JinjaLimits, InfiniteMacroRecursion) {
  expect_error_containing("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested too deeply");
}

TEST(JinjaLimits, ExponentialMacroFanOut) {
  expect_error_containing(
      "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
      "work budget");
}

TEST(JinjaLimits, NestedLoopsHitTheIterationLimit) {
  expect_error_containing(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "too many loop iterations");
}

TEST(JinjaLimits, OutputSize) {
  expect_error_containing("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "too large");
}

TEST(JinjaLimits, StringDoubling) {
  expect_error_containing(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
      "too large");
}

TEST(JinjaLimits, HugeRepetition) {
  expect_error_containing("{{ 'abc' * 9000000000000000000 }}", "too large");
  expect_error_containing("{{ [1, 2] * 9000000000000000000 }}", "too large");
}

// Found by tests/fuzz (fuzz_chat_template): the digits of a printf-style width or precision
// overflowed int64 before the limit was checked (UBSan: signed integer overflow).
TEST(JinjaLimits, HugePercentFormatWidth) {
  expect_error_containing("{{ '%6666666666666666666666666666s' % 'x' }}", "format width too big");
  expect_error_containing("{{ '%.6666666666666666666666666666f' % 1.5 }}", "precision too big");
  expect_error_containing("{{ '%*d' % (-9223372036854775807 - 1, 1) }}", "format width too big");
  EXPECT_EQ(render_or_error("{{ '%5s|%-3d|%.2f' % ('ab', 7, 1.5) }}"), "   ab|7  |1.50");
}

TEST(JinjaLimits, RangeIsCappedLikeTheSandbox) {
  expect_error_containing("{{ range(100001)|length }}", "MAX_RANGE (100000)");
  EXPECT_EQ(render_or_error("{{ range(100000)|length }}"), "100000");
}

TEST(JinjaLimits, DeeplyNestedValues) {
  expect_error_containing(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}",
      "nested too deeply");
}

TEST(JinjaLimits, NamespaceCycleIsAnErrorWhenPrintedAndDoesNotLeak) {
  expect_error_containing("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply");
  expect_error_containing("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns|tojson }}", "");
  EXPECT_EQ(render_or_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"), "True");
}

TEST(JinjaLimits, ExpressionNesting) {
  const std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  expect_error_containing("{{ " + parens + " }}", "nested too deeply");
  std::string chain = "1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  expect_error_containing("{{ " + chain + " }}", "nested too deeply");
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  expect_error_containing("{{ " + nots + "1 }}", "nested too deeply");
  std::string attrs = "x";
  for (int i = 0; i < 5000; ++i) attrs += ".a";
  expect_error_containing("{{ " + attrs + " }}", "nested too deeply");
  std::string filters = "x";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  expect_error_containing("{{ " + filters + " }}", "nested too deeply");
  std::string lists;
  for (int i = 0; i < 5000; ++i) lists += "[";
  expect_error_containing("{{ " + lists + " }}", "");
}

TEST(JinjaLimits, BlockNesting) {
  std::string src;
  for (int i = 0; i < 2000; ++i) src += "{% if true %}";
  src += "x";
  for (int i = 0; i < 2000; ++i) src += "{% endif %}";
  expect_error_containing(src, "nested too deeply");
}

TEST(JinjaLimits, DeepJsonInput) {
  nlohmann::ordered_json deep = "leaf";
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  nlohmann::ordered_json vars = {{"messages", nlohmann::ordered_json::array({{{"role", "user"}, {"content", deep}}})}};
  const std::string out = render_or_error("{{ messages[0].content }}", vars);
  EXPECT_EQ(out.rfind("ERROR: ", 0), 0u);
  EXPECT_NE(out.find("nested too deeply"), std::string::npos) << out;
}

TEST(JinjaLimits, ErrorsNameTheLine) {
  const std::string out = render_or_error("line one\n{{ 'a' }}\n{{ 1 / 0 }}");
  EXPECT_EQ(out, "ERROR: chat template error at line 3: division by zero");
  const std::string syntax = render_or_error("a\n\n{% if x %}");
  EXPECT_NE(syntax.find("syntax error at line 3"), std::string::npos) << syntax;
}

TEST(JinjaLimits, RenderIsRepeatableAndConcurrent) {
  auto tmpl = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto out = tmpl->render(in);
        if (out.ok() && *out == "ab2") ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 200);
}

// The caller's limits replace the defaults: a loop the defaults allow fails under a smaller
// iteration budget (the fuzz target renders that way).
TEST(JinjaLimits, CallerLimitsReplaceTheDefaults) {
  auto tmpl = ChatTemplate::parse("{% for i in range(5000) %}.{% endfor %}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  ChatTemplateInputs inputs;
  auto with_defaults = tmpl->render(inputs);
  ASSERT_TRUE(with_defaults.ok()) << with_defaults.error().message;
  EXPECT_EQ(with_defaults->size(), 5000u);
  jinja::RenderLimits small;
  small.max_loop_iterations = 1000;
  auto with_small = tmpl->render(inputs, small);
  ASSERT_FALSE(with_small.ok());
  EXPECT_NE(with_small.error().message.find("too many loop iterations"), std::string::npos)
      << with_small.error().message;
}

}  // namespace
}  // namespace spillway::api
