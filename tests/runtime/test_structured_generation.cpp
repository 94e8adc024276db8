// Structured output through the real serving path (EngineLoop + engine runner) on the
// trained stories260K model: the grammar matcher as each sequence's TokenConstraint.
// Checked against the schema itself (parse + validate by hand), never against earlier
// output: the constrained greedy output parses and validates, the unconstrained greedy
// output of the same prompt does not parse, and constrained greedy is deterministic alone,
// repeated and batched beside other (constrained and unconstrained) sequences.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/sampling/grammar_constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "grammar/compile_cache.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "runtime/engine_runner.h"
#include "support/paths.h"

namespace spillway::scheduler {
namespace {

using namespace runtime;

const std::string kModel = spillway::test_paths::testdata() + "/models/stories260K.gguf";

// A person: name (1..12 chars), age 0..120, a pet from a list; nothing else.
constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pet": {"enum": ["cat", "dog", "bird"]}
  },
  "required": ["name", "age", "pet"],
  "additionalProperties": false
})";

// The schema's constraints, checked independently of the grammar library.
::testing::AssertionResult validates(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return ::testing::AssertionFailure() << "not JSON: " << text;
  if (!j.is_object() || j.size() != 3) return ::testing::AssertionFailure() << "not a 3-member object: " << text;
  if (!j.contains("name") || !j["name"].is_string()) return ::testing::AssertionFailure() << "name: " << text;
  const auto name = j["name"].get<std::string>();
  // Length in code points.
  size_t cps = 0;
  for (unsigned char c : name) cps += (c & 0xC0) != 0x80;
  if (cps < 1 || cps > 12) return ::testing::AssertionFailure() << "name length " << cps << ": " << text;
  if (!j.contains("age") || !j["age"].is_number_integer()) return ::testing::AssertionFailure() << "age: " << text;
  const auto age = j["age"].get<int64_t>();
  if (age < 0 || age > 120) return ::testing::AssertionFailure() << "age range: " << text;
  if (!j.contains("pet") || !j["pet"].is_string()) return ::testing::AssertionFailure() << "pet: " << text;
  const auto pet = j["pet"].get<std::string>();
  if (pet != "cat" && pet != "dog" && pet != "bird") return ::testing::AssertionFailure() << "pet value: " << text;
  return ::testing::AssertionSuccess();
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<FinishReason> finish;
  std::optional<std::string> error;
  std::vector<std::string> choice_texts;
  std::vector<std::optional<FinishReason>> choice_finish;
};

class StructuredGeneration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = engine::Model::open(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    auto tokenizer = engine::Tokenizer::from_metadata(model_->source().metadata(), kModel);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    tokenizer_ = std::move(*tokenizer);
    trie_ = engine::build_token_trie(*tokenizer_);
    grammar::GrammarSpec spec;
    spec.kind = grammar::GrammarSpec::Kind::kJsonSchema;
    spec.text = kSchema;
    auto compiled = grammar::compile_spec(spec);
    ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(compiled));
    grammar_ = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
  }

  GenerationParams request(bool constrained, int32_t max_tokens = 96) const {
    GenerationParams p;
    p.prompt = tokenizer_->encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    if (constrained) p.grammar = grammar_;
    return p;
  }

  SchedulerConfig config() const {
    SchedulerConfig c;
    c.max_batch_tokens = 64;
    c.max_running = 16;
    c.max_context = 512;
    c.token_trie = trie_;
    return c;
  }

  std::vector<Outcome> run(const std::vector<GenerationParams>& requests) { return run(requests, config()); }

  // Outcomes per request; with n > 1 each choice's text is kept in choice_texts.
  std::vector<Outcome> run(const std::vector<GenerationParams>& requests, const SchedulerConfig& c,
                           EngineSnapshot* snapshot = nullptr) {
    kernels::ThreadPool pool(2);
    EngineLoop loop(make_engine_runner(*model_, pool, c, {}), *tokenizer_, c);
    loop.start();
    std::mutex mu;
    std::condition_variable cv;
    std::map<RequestId, Outcome> out;
    int finished = 0;
    std::vector<RequestId> ids;
    for (const GenerationParams& p : requests) {
      auto r = loop.submit(p, [&](RequestUpdate&& u) {
        std::lock_guard lock(mu);
        Outcome& o = out[u.id];
        for (const ChoiceUpdate& cu : u.choices) {
          if (o.choice_texts.size() <= static_cast<size_t>(cu.index)) o.choice_texts.resize(cu.index + 1);
          o.choice_texts[cu.index] += cu.text;
          if (cu.finish) {
            if (o.choice_finish.size() <= static_cast<size_t>(cu.index)) o.choice_finish.resize(cu.index + 1);
            o.choice_finish[cu.index] = cu.finish;
          }
          o.text += cu.text;
          for (const GeneratedToken& t : cu.tokens) o.tokens.push_back(t.id);
          if (cu.finish) o.finish = cu.finish;
        }
        if (u.error) o.error = u.error;
        if (u.finished) {
          ++finished;
          cv.notify_all();
        }
      });
      EXPECT_TRUE(std::holds_alternative<RequestId>(r));
      if (!std::holds_alternative<RequestId>(r)) return {};
      ids.push_back(std::get<RequestId>(r));
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return finished == static_cast<int>(ids.size()); });
    }
    loop.stop();
    if (snapshot) *snapshot = loop.snapshot();
    std::vector<Outcome> result;
    for (RequestId id : ids) result.push_back(out[id]);
    return result;
  }

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;
};

TEST_F(StructuredGeneration, VocabularyHasTheTokenizersBytesAndEndIds) {
  const grammar::Vocabulary v = engine::grammar_vocabulary(*tokenizer_);
  ASSERT_EQ(v.tokens.size(), static_cast<size_t>(tokenizer_->n_vocab()));
  ASSERT_FALSE(v.eos_ids.empty());
  for (int32_t id : v.eos_ids) {
    EXPECT_TRUE(tokenizer_->is_end_of_generation(id));
    EXPECT_EQ(v.tokens[id], "");
  }
  // Byte-fallback tokens stand for their byte, so the grammar can spell anything.
  const auto brace = tokenizer_->find_token("<0x7B>");
  ASSERT_TRUE(brace.has_value());
  EXPECT_EQ(v.tokens[*brace], "{");
  EXPECT_EQ(trie_->vocab_size(), v.tokens.size());
}

TEST_F(StructuredGeneration, ConstrainedGreedyValidatesAndUnconstrainedDoesNot) {
  const auto outcomes = run({request(false), request(true)});
  ASSERT_EQ(outcomes.size(), 2u);
  // The model tells a story: not JSON.
  EXPECT_TRUE(nlohmann::json::parse(outcomes[0].text, nullptr, false).is_discarded()) << outcomes[0].text;
  EXPECT_FALSE(outcomes[0].error.has_value());
  // Constrained: the same model, the same prompt, a valid instance that ends by itself.
  const Outcome& c = outcomes[1];
  EXPECT_FALSE(c.error.has_value()) << *c.error;
  ASSERT_TRUE(c.finish.has_value());
  EXPECT_EQ(*c.finish, FinishReason::Stop) << c.text;
  EXPECT_TRUE(tokenizer_->is_end_of_generation(c.tokens.back()));
  EXPECT_TRUE(validates(c.text));
  std::printf("constrained output: %s (%zu tokens)\n", c.text.c_str(), c.tokens.size());
}

TEST_F(StructuredGeneration, ConstrainedGreedyIsDeterministicAloneAndBatched) {
  const auto alone = run({request(true)});
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_TRUE(validates(alone[0].text));
  // Batched with unconstrained neighbours and copies of itself (each its own matcher).
  const auto batched = run({request(false), request(true), request(true), request(false, 40), request(true)});
  ASSERT_EQ(batched.size(), 5u);
  for (int i : {1, 2, 4}) {
    EXPECT_EQ(batched[i].tokens, alone[0].tokens) << i;
    EXPECT_EQ(batched[i].text, alone[0].text) << i;
  }
}

TEST_F(StructuredGeneration, MaxTokensCutsAConstrainedOutputWithLength) {
  const auto out = run({request(true, 3)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish, FinishReason::Length);
  EXPECT_EQ(out[0].tokens.size(), 3u);
  EXPECT_FALSE(out[0].error.has_value());
}

TEST_F(StructuredGeneration, RequestsWithAGrammarNeedATrie) {
  kernels::ThreadPool pool(1);
  SchedulerConfig c = config();
  c.token_trie = nullptr;
  EngineLoop loop(make_engine_runner(*model_, pool, c, {}), *tokenizer_, c);
  loop.start();
  auto r = loop.submit(request(true), [](RequestUpdate&&) {});
  ASSERT_TRUE(std::holds_alternative<SubmitRejection>(r));
  EXPECT_EQ(std::get<SubmitRejection>(r).kind, SubmitError::Invalid);
  loop.stop();
}

// A choice grammar the vocabulary can spell only one way: the mask leaves one token per
// step (forced tokens are counted), and the output is exactly the choice.
TEST_F(StructuredGeneration, ChoiceGrammarIsFollowedAndForcedTokensCounted) {
  grammar::GrammarSpec spec;
  spec.kind = grammar::GrammarSpec::Kind::kChoice;
  spec.choices = {"yes", "no"};
  auto compiled = grammar::compile_spec(spec);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(compiled));
  GenerationParams p = request(false, 20);
  p.grammar = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
  const uint64_t forced_before = engine::constraint_counters().forced_tokens.load();
  const uint64_t masks_before = engine::constraint_counters().masks.load();
  const auto out = run({p});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].text == "yes" || out[0].text == "no") << out[0].text;
  EXPECT_EQ(out[0].finish, FinishReason::Stop);
  EXPECT_EQ(engine::constraint_counters().masks.load() - masks_before, out[0].tokens.size());
  // At least the final EOS is forced (the only token allowed once the word is complete).
  EXPECT_GE(engine::constraint_counters().forced_tokens.load() - forced_before, 1u);
}

// n = 4 sampled choices (temperature 1, seeded): each has its own matcher, so each is a
// valid instance, whatever the others chose.
TEST_F(StructuredGeneration, EveryChoiceOfASampledRequestValidates) {
  GenerationParams p = request(true, 96);
  p.n = 4;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 1234;
  const auto out = run({p});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].choice_texts.size(), 4u);
  ASSERT_EQ(out[0].choice_finish.size(), 4u);
  int complete = 0;
  for (int c = 0; c < 4; ++c) {
    if (out[0].choice_finish[c] == FinishReason::Stop) {
      EXPECT_TRUE(validates(out[0].choice_texts[c])) << c;
      ++complete;
    } else {
      EXPECT_EQ(out[0].choice_finish[c], FinishReason::Length) << c;
    }
  }
  EXPECT_GE(complete, 2);  // the schema is bounded; a cut needs > 96 tokens
  // The choices sampled differently (4 equal texts would mean a shared matcher or RNG).
  EXPECT_FALSE(out[0].choice_texts[0] == out[0].choice_texts[1] && out[0].choice_texts[1] == out[0].choice_texts[2] &&
               out[0].choice_texts[2] == out[0].choice_texts[3]);
  EXPECT_FALSE(out[0].error.has_value());
}

// Preemption by recompute under KV pressure keeps each matcher where its tokens are: the
// constrained outputs equal those of a run without pressure.
TEST_F(StructuredGeneration, PreemptionKeepsTheConstrainedOutput) {
  std::vector<GenerationParams> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(i % 2 == 0, 96));
  const auto calm = run(reqs);
  SchedulerConfig tight = config();
  tight.max_batch_tokens = 32;
  tight.n_kv_blocks = 12;  // 192 token slots for 6 sequences of ~60 tokens
  tight.prefix_cache = false;
  EngineSnapshot snap;
  const auto pressed = run(reqs, tight, &snap);
  ASSERT_EQ(pressed.size(), calm.size());
  EXPECT_GT(snap.preemptions_total, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(pressed[i].tokens, calm[i].tokens) << i;
    if (i % 2 == 0) {
      EXPECT_TRUE(validates(pressed[i].text)) << i;
    }
  }
}

}  // namespace
}  // namespace spillway::scheduler
