// GrammarConstraint (engine/sampling/grammar_constraint.h) on the real stories260K tokenizer:
// the mask is exactly "the matcher accepts this token" (checked token by token), EOS only
// where the grammar is complete, greedy sampling through the Sampler follows the grammar
// whatever the logits say, rows wider than the vocabulary stay masked, and a cap or a
// refused token makes the constraint failed() with a message instead of crashing. Forced
// tokens (one allowed) are appended without running the sampler's chain, with the same
// greedy and seeded outputs and logprobs as when the chain runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "engine/model/model.h"
#include "engine/sampling/grammar_constraint.h"
#include "engine/sampling/mask_prefetcher.h"
#include "engine/sampling/sampling.h"
#include "engine/tokenizer/tokenizer.h"
#include "grammar/compile_cache.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

const std::string kModel = spillway::test_paths::testdata() + "/models/stories260K.gguf";

std::shared_ptr<const grammar::CompiledGrammar> compile(grammar::GrammarSpec::Kind kind, std::string text,
                                                        std::vector<std::string> choices = {}) {
  grammar::GrammarSpec spec;
  spec.kind = kind;
  spec.text = std::move(text);
  spec.choices = std::move(choices);
  auto r = grammar::compile_spec(spec);
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(r));
  return std::get<std::shared_ptr<const grammar::CompiledGrammar>>(r);
}

bool bit(const std::vector<uint64_t>& m, int32_t t) { return (m[t / 64] >> (t % 64)) & 1; }

class GrammarConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = Model::open(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto tok = Tokenizer::from_metadata((*model)->source().metadata(), kModel);
    ASSERT_TRUE(tok.ok());
    tokenizer_ = std::move(*tok);
    trie_ = build_token_trie(*tokenizer_);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
};

TEST_F(GrammarConstraintTest, MaskIsExactlyWhatTheMatcherAcceptsAndEosOnlyAtTheEnd) {
  auto g = compile(grammar::GrammarSpec::Kind::kRegex, "(ab|cd)[0-9]{1,2}");
  const int32_t n = tokenizer_->n_vocab();
  GrammarConstraint c(g, trie_);
  std::mt19937 rng(7);
  for (int step = 0; step < 8; ++step) {
    std::vector<uint64_t> mask((n + 63) / 64, 0);
    c.fill_allowed(mask, n);
    ASSERT_FALSE(c.failed()) << c.error_message();
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < n; ++t) {
      grammar::Matcher probe = c.matcher();  // a copy: does t advance it?
      const bool accepts = probe.accept_token(t).ok();
      ASSERT_EQ(bit(mask, t), accepts) << "step " << step << " token " << t;
      if (tokenizer_->is_end_of_generation(t)) {
        EXPECT_EQ(accepts, c.matcher().is_accepting());
      }
      if (accepts) allowed.push_back(t);
    }
    ASSERT_FALSE(allowed.empty());
    const int32_t pick = allowed[rng() % allowed.size()];
    c.accept(pick);
    ASSERT_FALSE(c.failed());
    if (tokenizer_->is_end_of_generation(pick)) {
      EXPECT_TRUE(c.terminated());
      return;
    }
  }
}

TEST_F(GrammarConstraintTest, GreedySamplingFollowsTheGrammarAgainstTheLogits) {
  auto g = compile(grammar::GrammarSpec::Kind::kChoice, "", {"yes", "no"});
  const int32_t n = tokenizer_->n_vocab();
  GrammarConstraint c(g, trie_);
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 1);
  sampler.set_constraint(&c);
  // Logits that prefer the EOS and "x" above everything: the grammar must still win.
  std::vector<int32_t> history = {1};
  std::string text;
  for (int step = 0; step < 10 && !c.terminated(); ++step) {
    std::vector<float> logits(n, 0.0f);
    for (int32_t t = 0; t < n; ++t) logits[t] = static_cast<float>((t * 7919) % 101) * 0.01f;
    logits[tokenizer_->eos_id()] = 50.0f;
    if (auto x = tokenizer_->find_token("x")) logits[*x] = 40.0f;
    SampledToken s = sampler.sample(logits.data(), n, history, 1);
    history.push_back(s.token);
    if (!tokenizer_->is_end_of_generation(s.token)) text += tokenizer_->token_bytes(s.token, false);
  }
  EXPECT_FALSE(c.failed()) << c.error_message();
  EXPECT_TRUE(c.terminated());
  EXPECT_TRUE(text == "yes" || text == "no") << text;
  EXPECT_TRUE(tokenizer_->is_end_of_generation(history.back()));
}

TEST_F(GrammarConstraintTest, RowsWiderThanTheVocabularyStayMasked) {
  auto g = compile(grammar::GrammarSpec::Kind::kJsonObject, "");
  GrammarConstraint c(g, trie_);
  const int32_t wide = tokenizer_->n_vocab() + 100;
  std::vector<uint64_t> mask((wide + 63) / 64, 0);
  c.fill_allowed(mask, wide);
  for (int32_t t = tokenizer_->n_vocab(); t < wide; ++t) EXPECT_FALSE(bit(mask, t)) << t;
  EXPECT_TRUE(bit(mask, *tokenizer_->find_token("<0x7B>")));  // '{'
}

TEST_F(GrammarConstraintTest, CapsAndRefusedTokensFailWithAMessage) {
  auto g = compile(grammar::GrammarSpec::Kind::kJsonObject, "");
  grammar::MatcherLimits tiny;
  tiny.max_mask_steps = 0;
  GrammarConstraint capped(g, trie_, tiny);
  const int32_t n = tokenizer_->n_vocab();
  std::vector<uint64_t> mask((n + 63) / 64, 0);
  capped.fill_allowed(mask, n);
  EXPECT_TRUE(capped.failed());
  EXPECT_NE(capped.error_message().find("structured output"), std::string::npos);
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
  const uint64_t failures = constraint_counters().failures.load();
  GrammarConstraint refused(g, trie_);
  refused.accept(*tokenizer_->find_token("<0x41>"));  // 'A' cannot start a JSON object
  EXPECT_TRUE(refused.failed());
  EXPECT_GT(constraint_counters().failures.load(), failures);
  refused.accept(0);  // after a failure: ignored, no crash
  GrammarConstraint outside(g, trie_);
  outside.accept(n + 5);
  EXPECT_TRUE(outside.failed());
}

// Masks prepared on the prefetcher's thread equal the masks computed in fill_allowed, are
// computed once per step, and a step with no constrained rows starts nothing.
TEST_F(GrammarConstraintTest, PrefetchedMasksEqualInlineOnes) {
  auto g = compile(grammar::GrammarSpec::Kind::kRegex, "[a-c]{2}(x|yz)");
  const int32_t n = tokenizer_->n_vocab();
  GrammarConstraint inline_c(g, trie_), pre_a(g, trie_), pre_b(g, trie_);
  MaskPrefetcher prefetcher;
  std::vector<TokenConstraint*> none = {nullptr, nullptr};
  prefetcher.start(none);
  prefetcher.wait();
  const std::string text = "acyz";
  for (size_t step = 0; step <= text.size(); ++step) {
    std::vector<TokenConstraint*> jobs = {&pre_a, nullptr, &pre_b};
    prefetcher.start(jobs);
    prefetcher.wait();
    const uint64_t masks_before = constraint_counters().masks.load();
    std::vector<uint64_t> a((n + 63) / 64, 0), b = a, want = a;
    pre_a.fill_allowed(a, n);
    pre_b.fill_allowed(b, n);
    EXPECT_EQ(constraint_counters().masks.load(), masks_before) << "prepared masks are not recomputed";
    inline_c.fill_allowed(want, n);
    EXPECT_EQ(a, want) << step;
    EXPECT_EQ(b, want) << step;
    char byte_token[8];
    std::snprintf(byte_token, sizeof byte_token, "<0x%02X>", step < text.size() ? text[step] : 0);
    const int32_t t = step < text.size() ? *tokenizer_->find_token(byte_token) : tokenizer_->eos_id();
    for (GrammarConstraint* c : {&inline_c, &pre_a, &pre_b}) {
      c->accept(t);
      ASSERT_FALSE(c->failed()) << step << ": " << c->error_message();
    }
  }
  EXPECT_TRUE(pre_a.terminated());
}

// A token the grammar forces is appended without the chain (Sampler::forced_appends counts
// it, chain_runs does not), and greedy and seeded outputs (tokens and logprobs) equal those
// of a sampler that runs the chain for every row: the grammar alternates choices and
// forced tokens, so later seeded draws show that the RNG stayed aligned.
TEST_F(GrammarConstraintTest, ForcedTokensSkipTheChainWithTheSameOutputs) {
  auto g = compile(grammar::GrammarSpec::Kind::kRegex, "(q[0-9]\\.[a-z]{1,2}){5}");
  // A vocabulary where "q" and "." have one spelling each: ASCII bytes, a few pairs, EOS.
  grammar::Vocabulary v;
  for (int b = 0; b < 128; ++b) v.tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"ab", "cd", "zz", "1.", "7.", "42"}) v.tokens.push_back(t);
  v.tokens.push_back("");
  v.eos_ids = {static_cast<int32_t>(v.tokens.size() - 1)};
  auto trie = grammar::TokenTrie::build(std::move(v));
  const int32_t n = static_cast<int32_t>(trie->vocab_size());
  struct Run {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    int forced_positions = 0;
    uint64_t chain_runs = 0, forced_appends = 0;
    bool terminated = false;
  };
  auto run = [&](const SamplingParams& params, bool shortcut) {
    GrammarConstraint c(g, trie);
    Sampler sampler(params, 99);
    sampler.set_constraint(&c);
    sampler.set_forced_shortcut(shortcut);
    SamplerScratch scratch;
    SampledToken out;
    Run r;
    std::vector<int32_t> history = {1};
    for (int step = 0; step < 40 && !c.terminated(); ++step) {
      std::mt19937 logit_rng(1000 + step);  // the same logits in both runs
      std::normal_distribution<float> normal(0.0f, 3.0f);
      std::vector<float> logits(n);
      for (float& l : logits) l = normal(logit_rng);
      r.forced_positions += c.forced_token() >= 0;
      sampler.sample(logits.data(), n, history, 1, {}, scratch, out);
      EXPECT_FALSE(c.failed()) << c.error_message();
      history.push_back(out.token);
      r.tokens.push_back(out.token);
      r.logprobs.push_back(out.logprob);
    }
    r.chain_runs = sampler.chain_runs();
    r.forced_appends = sampler.forced_appends();
    r.terminated = c.terminated();
    return r;
  };
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams seeded;
  seeded.temperature = 1.3f;
  seeded.top_p = 0.95f;
  seeded.seed = 1234;
  seeded.logprobs = true;
  seeded.top_logprobs = 2;
  SamplingParams top_k = seeded;
  top_k.top_k = 20;
  top_k.seed = 77;
  for (const SamplingParams& params : {greedy, seeded, top_k}) {
    const Run fast = run(params, true), slow = run(params, false);
    EXPECT_TRUE(fast.terminated);
    EXPECT_EQ(fast.tokens, slow.tokens);
    EXPECT_EQ(fast.logprobs, slow.logprobs);
    // "q" (5 times), "." after the digit tokens "0".."9" but 1, 7 (some of 5) and the
    // final EOS are forced.
    EXPECT_GE(fast.forced_positions, 6);
    EXPECT_EQ(fast.forced_positions, slow.forced_positions);
    EXPECT_EQ(fast.forced_appends, static_cast<uint64_t>(fast.forced_positions));
    EXPECT_EQ(fast.chain_runs, fast.tokens.size() - static_cast<size_t>(fast.forced_positions));
    EXPECT_EQ(slow.forced_appends, 0u);
    EXPECT_EQ(slow.chain_runs, slow.tokens.size());
  }
}

}  // namespace
}  // namespace spillway::engine
