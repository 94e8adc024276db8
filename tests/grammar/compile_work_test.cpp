// Compile work on adversarial regexes (chains of '.' and bounded repeats, as the grammar fuzz
// target found), bounded without timing: CompiledGrammar::compile_work() is a deterministic
// count of the compile's steps, and CompileLimits::max_work caps it ("grammar too complex").
// Before the exact-chars search memoised each state's safe-character successors, the families
// below cost 19k-40k units per DFA state (growing with the chain length; ~10x what they cost
// now) and the fuzz input ~7.5k; now all stay under ~3.3k per state.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/compile_cache.h"
#include "grammar/regex.h"
#include "test_helpers.h"
#include "support/paths.h"

namespace spillway::grammar {
namespace {

// Per-state work bound: the analysis passes look at each state a bounded number of times.
constexpr uint64_t kMaxWorkPerState = 5000;

// `[a-z]*x.{n}<tail>`: x may start anywhere in the loop, so DFA states are subsets of chain
// positions (~6 * 2^n of them). States a few characters before the tail have small
// live_chars, and the counted-tail search (mark_exact_chars) walks the chain from each: it
// fails on the literal tail (the fuzz input's shape) and succeeds (kExactChars) before '"'.
std::string dot_chain(int n, const std::string& tail = "opic power sch") {
  return "[a-z]*x" + std::string(static_cast<size_t>(n), '.') + tail;
}

// Compiles the family for n = 4, 6, 8 (~4x the states each step) and checks the work per
// state stays bounded; returns the n = 8 grammar.
std::shared_ptr<const CompiledGrammar> expect_linear_work(const std::string& tail) {
  std::shared_ptr<const CompiledGrammar> g;
  size_t prev_states = 0;
  for (int n : {4, 6, 8}) {
    SCOPED_TRACE(n);
    g = testing::must_compile(regex_grammar(dot_chain(n, tail)));
    const uint64_t work = g->compile_work();
    EXPECT_LE(work, kMaxWorkPerState * g->state_count()) << work << " units for " << g->state_count() << " states";
    EXPECT_GT(g->state_count(), 3 * prev_states);  // the family really is sized up
    prev_states = g->state_count();
    // The counted-tail search runs from the states with live_chars in 1..15.
    size_t searched = 0;
    for (size_t s = 0; s < g->state_count(); ++s)
      searched += g->state(s).live_chars >= 1 && g->state(s).live_chars < 16;
    EXPECT_GT(searched, g->state_count() / 8);
  }
  return g;
}

TEST(CompileWork, DotChainBeforeALiteralIsLinearInStates) {
  auto g = expect_linear_work("opic power sch");
  const std::string mid(8, '#');
  EXPECT_TRUE(testing::accepts(g, "qx" + mid + "opic power sch"));
  EXPECT_TRUE(testing::accepts(g, std::string(9, 'x') + "opic power sch"));  // the first x starts the chain
  EXPECT_TRUE(testing::accepts(g, "abx\xC3\xA9" + std::string(7, 'z') + "opic power sch"));
  EXPECT_FALSE(testing::accepts(g, "ab\xC3\xA9" + std::string(7, 'z') + "opic power sch"));
  EXPECT_FALSE(testing::accepts(g, "qx" + mid.substr(1) + "opic power sch"));
  EXPECT_FALSE(testing::accepts(g, "qx" + mid + "#opic power sch"));
}

TEST(CompileWork, DotChainBeforeAQuoteIsLinearInStates) {
  auto g = expect_linear_work("\"");
  size_t exact = 0;
  for (size_t s = 0; s < g->state_count(); ++s) exact += (g->state(s).flags & kExactChars) != 0;
  EXPECT_GT(exact, g->state_count() / 16);  // here the search succeeds
  EXPECT_TRUE(testing::accepts(g, "abx12345678\""));
  EXPECT_FALSE(testing::accepts(g, "abx1234567\""));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fuzz target's input (tests/fuzz/corpus/grammar: first byte 'I' = regex, the rest the
// regex, NULs included) compiles within the default caps but the wall clock's.
TEST(CompileWork, FuzzRegexStaysWithinTheWorkCap) {
  const std::string input = read_file(spillway::test_paths::source() + "/tests/fuzz/corpus/grammar/regex_dot_chains.bin");
  ASSERT_GT(input.size(), 200u);
  ASSERT_EQ(input[0] % 3, 1);  // fuzz_grammar.cpp: 1 = regex
  GrammarSpec spec;
  spec.kind = GrammarSpec::Kind::kRegex;
  spec.text = input.substr(1);
  const CompileLimits defaults;
  auto r = compile_spec(spec, testing::test_limits());
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CompiledGrammar>>(r)) << std::get<CompileError>(r).message;
  const auto& g = std::get<0>(r);
  EXPECT_LE(g->compile_work(), kMaxWorkPerState * g->state_count());
  EXPECT_LE(g->compile_work(), defaults.max_work / 2);
}

// Over max_work is an error value naming the cause, whatever the machine's load.
TEST(Caps, WorkCapIsAnError) {
  auto g = regex_grammar(dot_chain(8));
  ASSERT_TRUE(g.ok());
  CompileLimits small = testing::test_limits();
  auto full = CompiledGrammar::compile(*g, small);
  ASSERT_TRUE(full.ok());
  small.max_work = (*full)->compile_work() / 2;
  auto c = CompiledGrammar::compile(*g, small);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("too complex"), std::string::npos) << c.error().message;
  small.max_work = (*full)->compile_work();
  EXPECT_TRUE(CompiledGrammar::compile(*g, small).ok());
}

// The counted-tail flags the memoised search sets are exact: on the family with kExactChars
// states, at every step of random walks, the mask with slices equals the plain trie walk's
// and "accept_token succeeds" for every token.
TEST(CompileWork, DotChainMasksEqualThePlainWalk) {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, static_cast<char>(b)));
  std::mt19937_64 rng(11);
  const std::string chars = "abcxyzop# .\"\\";
  for (size_t len = 2; len <= 20; ++len)
    for (int k = 0; k < 20; ++k) {
      std::string t;
      for (size_t i = 0; i < len; ++i) t += chars[rng() % chars.size()];
      v.tokens.push_back(t);
    }
  for (const char* t : {"opic", " power", " sch", "opic power sch", "x", "é", "中文", "\xE4\xB8", "\xAD"})
    v.tokens.push_back(t);
  v.tokens.push_back("");  // EOS
  v.eos_ids = {static_cast<int32_t>(v.tokens.size() - 1)};
  auto trie = TokenTrie::build(std::move(v));
  auto g = testing::must_compile(regex_grammar(dot_chain(6, "\"")));
  const int32_t vocab = static_cast<int32_t>(trie->vocab_size());
  std::vector<uint64_t> mask(trie->mask_words()), plain(trie->mask_words());
  auto bit = [](const std::vector<uint64_t>& m, int32_t t) { return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; };
  MatcherLimits no_slices;
  no_slices.use_slices = false;
  int exact_paths = 0;
  for (int walk = 0; walk < 8; ++walk) {
    Matcher m(g, trie);
    Matcher ref(g, trie, no_slices);
    for (int step = 0; step < 40; ++step) {
      MaskStats st;
      ASSERT_TRUE(m.compute_mask(mask.data(), &st).ok());
      exact_paths += st.exact_count_path;
      ASSERT_TRUE(ref.compute_mask(plain.data()).ok());
      ASSERT_EQ(mask, plain) << "walk " << walk << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab; ++t) {
        const bool ok = m.accept_token(t).ok();
        if (ok) m.rollback(1);
        ASSERT_EQ(ok, bit(mask, t) != 0) << "token " << t << " walk " << walk << " step " << step;
        if (ok) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      if (t == vocab - 1) break;  // EOS
      ASSERT_TRUE(m.accept_token(t).ok());
      ASSERT_TRUE(ref.accept_token(t).ok());
    }
  }
  EXPECT_GT(exact_paths, 0);  // the walks reached counted tails
}

}  // namespace
}  // namespace spillway::grammar
