// Stop conditions and streamed text, through the scheduler with a scripted fake model.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace spillway::scheduler::testing {
namespace {

constexpr int32_t kAb = 34, kBc = 35;  // two-letter tokens "ab", "bc"
int32_t L(char c) { return FakeTokenizer::letter(c); }

// Generates `script` after a prompt of prompt_len tokens, then 'z' forever.
NextToken scripted(size_t prompt_len, std::vector<int32_t> script) {
  return [prompt_len, script](std::span<const int32_t> ctx) {
    const size_t i = ctx.size() - prompt_len;
    return i < script.size() ? script[i] : L('z');
  };
}

// Texts of the choice-0 updates, in order.
struct Recorded {
  std::vector<std::string> texts;
  std::vector<size_t> token_counts;
};

class OutputTest : public ::testing::Test {
 protected:
  RequestResult run(std::vector<int32_t> script, GenerationParams p, Recorded* recorded = nullptr) {
    p.prompt = letters("hi");
    Harness h(small_config(), scripted(p.prompt.size(), script));
    h.scheduler.add_request(1, p, [&](RequestUpdate&& u) {
      if (recorded) {
        for (const ChoiceUpdate& c : u.choices) {
          recorded->texts.push_back(c.text);
          recorded->token_counts.push_back(c.tokens.size());
        }
      }
      result_.apply(std::move(u));
    });
    h.run_all();
    EXPECT_EQ(h.runner.corrupt_reads, 0);
    EXPECT_EQ(result_.finished_updates, 1);
    return result_;
  }
  static GenerationParams params(int32_t max_tokens) {
    GenerationParams p;
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    return p;
  }
  RequestResult result_;
};

TEST_F(OutputTest, StopStringSplitAcrossTokensIsExcluded) {
  GenerationParams p = params(10);
  p.stop = {"abc"};
  Recorded rec;
  const RequestResult r = run({L('x'), kAb, L('c'), L('d')}, p, &rec);
  const ChoiceResult& c = r.choices.at(0);
  EXPECT_EQ(c.text, "x");
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{L('x'), kAb, L('c')}));
  EXPECT_EQ(c.finish, FinishReason::Stop);
  EXPECT_EQ(rec.texts, (std::vector<std::string>{"x", "", ""}));
  EXPECT_EQ(rec.token_counts, (std::vector<size_t>{1, 1, 1}));
}

TEST_F(OutputTest, HeldBackTextIsReleasedWhenItStopsMatching) {
  GenerationParams p = params(4);
  p.stop = {"abd"};
  Recorded rec;
  const RequestResult r = run({L('x'), kAb, L('c'), L('e')}, p, &rec);
  EXPECT_EQ(rec.texts, (std::vector<std::string>{"x", "", "abc", "e"}));
  EXPECT_EQ(r.choices.at(0).text, "xabce");
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Length);
}

TEST_F(OutputTest, HeldBackTextIsReleasedAtTheEnd) {
  GenerationParams p = params(2);
  p.stop = {"abc"};
  const RequestResult r = run({L('x'), kAb}, p);
  EXPECT_EQ(r.choices.at(0).text, "xab");
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Length);
}

TEST_F(OutputTest, EarliestStopStringWins) {
  GenerationParams p = params(10);
  p.stop = {"cd", "bcd"};
  const RequestResult r = run({L('a'), L('b'), L('c'), L('d')}, p);
  EXPECT_EQ(r.choices.at(0).text, "a");
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Stop);
}

TEST_F(OutputTest, StopStringInsideOneToken) {
  GenerationParams p = params(10);
  p.stop = {"c"};
  const RequestResult r = run({L('a'), kBc, L('d')}, p);
  EXPECT_EQ(r.choices.at(0).text, "ab");
  EXPECT_EQ(r.choices.at(0).tokens.size(), 2u);
}

TEST_F(OutputTest, Utf8SplitAcrossTokensIsHeldUntilComplete) {
  GenerationParams p = params(4);
  Recorded rec;
  const RequestResult r =
      run({L('x'), FakeTokenizer::kEAcute0, FakeTokenizer::kEAcute1, L('y')}, p, &rec);
  EXPECT_EQ(rec.texts, (std::vector<std::string>{"x", "", "\xC3\xA9", "y"}));
  EXPECT_EQ(r.choices.at(0).text, "x\xC3\xA9y");
}

TEST_F(OutputTest, StopStringWithMultiByteCharacter) {
  GenerationParams p = params(10);
  p.stop = {"\xC3\xA9."};
  const RequestResult r =
      run({L('x'), FakeTokenizer::kEAcute0, FakeTokenizer::kEAcute1, FakeTokenizer::kDot, L('y')}, p);
  EXPECT_EQ(r.choices.at(0).text, "x");
  EXPECT_EQ(r.choices.at(0).tokens.size(), 4u);
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Stop);
}

TEST_F(OutputTest, StopTokenIdStopsWithoutItsText) {
  GenerationParams p = params(10);
  p.stop_token_ids = {L('c')};
  const RequestResult r = run({L('a'), L('b'), L('c'), L('d')}, p);
  EXPECT_EQ(r.choices.at(0).text, "ab");
  EXPECT_EQ(r.choices.at(0).tokens, (std::vector<int32_t>{L('a'), L('b'), L('c')}));
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Stop);
  EXPECT_EQ(r.last.completion_tokens, 3);
}

TEST_F(OutputTest, EndOfGenerationStops) {
  for (int32_t eog : {FakeTokenizer::kEos, FakeTokenizer::kEot}) {
    result_ = {};
    const RequestResult r = run({L('a'), eog, L('b')}, params(10));
    EXPECT_EQ(r.choices.at(0).text, "a");
    EXPECT_EQ(r.choices.at(0).tokens, (std::vector<int32_t>{L('a'), eog}));
    EXPECT_EQ(r.choices.at(0).finish, FinishReason::Stop);
  }
}

TEST_F(OutputTest, IgnoreEosKeepsGoing) {
  GenerationParams p = params(5);
  p.ignore_eos = true;
  const RequestResult r = run({L('a'), FakeTokenizer::kEos, L('b'), FakeTokenizer::kEot}, p);
  EXPECT_EQ(r.choices.at(0).tokens,
            (std::vector<int32_t>{L('a'), FakeTokenizer::kEos, L('b'), FakeTokenizer::kEot, L('z')}));
  EXPECT_EQ(r.choices.at(0).text, "abz");  // special tokens skipped
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Length);
}

TEST_F(OutputTest, SpecialTokensShownWhenNotSkipped) {
  GenerationParams p = params(3);
  p.ignore_eos = true;
  p.skip_special_tokens = false;
  const RequestResult r = run({L('a'), FakeTokenizer::kEos, L('b')}, p);
  EXPECT_EQ(r.choices.at(0).text, "a</s>b");
}

TEST_F(OutputTest, MaxTokensFinishesWithLength) {
  const RequestResult r = run({}, params(3));
  EXPECT_EQ(r.choices.at(0).tokens, (std::vector<int32_t>{L('z'), L('z'), L('z')}));
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Length);
  EXPECT_EQ(r.last.completion_tokens, 3);
}

TEST(Output, MinTokensBansEndOfGenerationAndStopIds) {
  // The model always wants EOS: the first min_tokens tokens must be something else.
  const NextToken wants_eos = [](std::span<const int32_t>) { return FakeTokenizer::kEos; };
  Harness h(small_config(), wants_eos);
  GenerationParams p = greedy(letters("hi"), 10);
  p.min_tokens = 3;
  const RequestId id = h.add(p);
  // The model always wants 'c', a stop id.
  const NextToken wants_c = [](std::span<const int32_t>) { return L('c'); };
  Harness h2(small_config(), wants_c);
  GenerationParams p2 = greedy(letters("hi"), 10);
  p2.min_tokens = 2;
  p2.stop_token_ids = {L('c')};
  const RequestId id2 = h2.add(p2);
  h.run_all();
  h2.run_all();

  const ChoiceResult& c = h.results[id].choices.at(0);
  ASSERT_EQ(c.tokens.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(h.tokenizer.is_end_of_generation(c.tokens[i]));
  EXPECT_EQ(c.tokens[3], FakeTokenizer::kEos);
  EXPECT_EQ(c.finish, FinishReason::Stop);
  h.expect_matches_reference(id);

  const ChoiceResult& c2 = h2.results[id2].choices.at(0);
  ASSERT_EQ(c2.tokens.size(), 3u);
  EXPECT_NE(c2.tokens[0], L('c'));
  EXPECT_NE(c2.tokens[1], L('c'));
  EXPECT_EQ(c2.tokens[2], L('c'));
  h2.expect_matches_reference(id2);
}

TEST(Output, LogprobsArePassedThrough) {
  Harness h(small_config());
  GenerationParams p = greedy(letters("abc"), 6);
  p.sampling.logprobs = true;
  p.sampling.top_logprobs = 2;
  std::vector<RequestUpdate> updates;
  h.scheduler.add_request(1, p, [&](RequestUpdate&& u) { updates.push_back(std::move(u)); });
  h.run_all();

  std::vector<int32_t> ctx = p.prompt;
  int n = 0;
  for (const RequestUpdate& u : updates) {
    for (const ChoiceUpdate& c : u.choices) {
      for (const GeneratedToken& t : c.tokens) {
        float logits[FakeTokenizer::kVocab];
        fake_logits(ctx, hashed_letter, logits);
        double sum = 0;
        for (float l : logits) sum += std::exp(double(l));
        const double expected = logits[t.id] - std::log(sum);
        EXPECT_NEAR(t.logprob, expected, 1e-4);
        ASSERT_EQ(t.top_logprobs.size(), 2u);
        EXPECT_EQ(t.top_logprobs[0].token, t.id);  // greedy
        EXPECT_NEAR(t.top_logprobs[0].logprob, expected, 1e-4);
        EXPECT_LT(t.top_logprobs[1].logprob, t.top_logprobs[0].logprob);
        ctx.push_back(t.id);
        ++n;
      }
    }
  }
  EXPECT_EQ(n, 6);
}

}  // namespace
}  // namespace spillway::scheduler::testing
