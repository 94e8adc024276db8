// The compile cache (hits, whitespace-insensitive keys, errors not cached) and the caps:
// over a cap is an error value, never a hang.
#include <gtest/gtest.h>

#include "grammar/compile_cache.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "test_helpers.h"

namespace spillway::grammar {
namespace {

TEST(CompileCache, HitsIgnoreSchemaWhitespace) {
  CompileCache cache(4, testing::test_limits());
  GrammarSpec a{GrammarSpec::Kind::kJsonSchema, R"({"type":"object","properties":{"x":{"type":"integer"}}})", {}, {}};
  GrammarSpec b = a;
  b.text = "{ \"type\": \"object\",\n \"properties\": { \"x\": { \"type\": \"integer\" } } }";
  auto ra = cache.get(a);
  auto rb = cache.get(b);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(ra));
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(rb));
  EXPECT_EQ(std::get<0>(ra).get(), std::get<0>(rb).get());
  EXPECT_EQ(cache.hits(), 1u);
  GrammarSpec strict = a;
  strict.json.strict = true;
  auto rs = cache.get(strict);
  EXPECT_NE(std::get<0>(rs).get(), std::get<0>(ra).get());
}

// The repetition wrapper (forced tool calls): prefix G suffix (separator prefix G suffix)*
// within the bounds; a different wrapper is a different cache entry.
TEST(CompileCache, WrapperRepeatsTheGrammarBetweenLiterals) {
  CompileCache cache(4, testing::test_limits());
  GrammarSpec spec;
  spec.kind = GrammarSpec::Kind::kChoice;
  spec.choices = {"x", "yy"};
  spec.wrap = true;
  spec.prefix = "<a>";
  spec.suffix = "</a>";
  spec.separator.assign(1, '\n');  // not = "\n": GCC 12 -Wrestrict false positive on a 1-char literal
  spec.min_items = 1;
  spec.max_items = 2;
  auto r = cache.get(spec);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(r));
  auto accepts = [&](std::string_view text) {
    Matcher m(std::get<0>(r), nullptr);
    return m.accept_bytes(text) && m.is_accepting();
  };
  EXPECT_TRUE(accepts("<a>x</a>"));
  EXPECT_TRUE(accepts("<a>x</a>\n<a>yy</a>"));
  EXPECT_FALSE(accepts("<a>x</a>\n<a>x</a>\n<a>x</a>"));  // over max_items
  EXPECT_FALSE(accepts("x"));
  EXPECT_FALSE(accepts("<a>y</a>"));
  EXPECT_FALSE(accepts(""));
  GrammarSpec unbounded = spec;
  unbounded.max_items = kUnbounded;
  auto u = cache.get(unbounded);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(u));
  EXPECT_NE(std::get<0>(u).get(), std::get<0>(r).get());
  Matcher m(std::get<0>(u), nullptr);
  EXPECT_TRUE(m.accept_bytes("<a>x</a>\n<a>x</a>\n<a>x</a>") && m.is_accepting());
  GrammarSpec bad = spec;
  bad.min_items = 0;
  EXPECT_TRUE(std::holds_alternative<CompileError>(cache.get(bad)));
}

TEST(CompileCache, ErrorsCarryKeywordAndPointer) {
  CompileCache cache;
  GrammarSpec bad{GrammarSpec::Kind::kJsonSchema, R"({"properties":{"a":{"not":{"type":"null"}}}})", {}, {}};
  auto r = cache.get(bad);
  ASSERT_TRUE(std::holds_alternative<CompileError>(r));
  EXPECT_EQ(std::get<CompileError>(r).issue.keyword, "not");
  EXPECT_EQ(std::get<CompileError>(r).issue.pointer, "/properties/a/not");
  GrammarSpec notjson{GrammarSpec::Kind::kJsonSchema, "{", {}, {}};
  EXPECT_TRUE(std::holds_alternative<CompileError>(cache.get(notjson)));
  GrammarSpec gbnf{GrammarSpec::Kind::kGbnf, "root ::= x", {}, {}};
  EXPECT_NE(std::get<CompileError>(cache.get(gbnf)).message.find("'x'"), std::string::npos);
}

TEST(Caps, StateCapIsAnError) {
  CompileLimits small = testing::test_limits();
  small.max_dfa_states = 100;
  auto g = regex_grammar("[a-z]{0,500}");
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::compile(*g, small);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("too large"), std::string::npos);
}

TEST(Caps, MaskWorkCapIsAnError) {
  auto g = testing::must_compile(regex_grammar("a*"));
  MatcherLimits limits;
  limits.max_stacks = 1;
  Matcher ok(g, nullptr, limits);
  EXPECT_TRUE(ok.accept_bytes("aaa"));
  Vocabulary v{{"a", "b", ""}, {2}};
  auto trie = TokenTrie::build(v);
  MatcherLimits tiny;
  tiny.max_mask_steps = 0;
  Matcher m(g, trie, tiny);
  std::vector<uint64_t> mask(trie->mask_words());
  auto s = m.compute_mask(mask.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cap"), std::string::npos);
}

}  // namespace
}  // namespace spillway::grammar
