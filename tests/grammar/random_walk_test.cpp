// Token-level checks on a synthetic vocabulary (every single byte plus JSON-ish sub-words,
// whole and cut UTF-8 characters): the mask agrees with accept_token for every token at
// every step of random walks (this covers the string fast path and its suffix trie), a
// random walk that samples uniformly among allowed tokens until EOS produces JSON that
// valijson (an independent validator) accepts, and rollback restores the mask.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "test_helpers.h"
#include "support/paths.h"

namespace spillway::grammar {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

std::shared_ptr<const TokenTrie> synthetic_trie() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\"}", "\":", "\": ", "\", \"", "\":\"", "\",\"", "true", "false", "null", " \"",
                        ", ", "},", "],", "[{", "}]", "12", "345", "0.", ".5", "e+", "-1", "name", "age",
                        "hello", " world", "\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "\xE4\xB8", "\xAD", "\\n",
                        "\\\"", "\\u00", "\n  ", "\n", "  ", "ab\"", "x\",", "\"x", "\"a", "00", "2024-",
                        "T12:", "Z\"", "@example.com", "http://", "com", "-4", "a-", "Point", "Feature",
                        "celsius", "type", "location", "2.0", "tools/call", "ABC-", "1234"})
    v.tokens.push_back(t);
  v.tokens.push_back("");  // EOS
  v.eos_ids = {static_cast<int32_t>(v.tokens.size() - 1)};
  return TokenTrie::build(std::move(v));
}

std::vector<fs::path> corpus() {
  const fs::path dir = fs::path(spillway::test_paths::source()) / "bench/grammar/schemas";
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir)) if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

constexpr int kWalks = 12;

bool bit(const std::vector<uint64_t>& m, int32_t t) { return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

TEST(RandomWalk, MaskAgreesWithAcceptAndOutputsValidate) {
  auto trie = synthetic_trie();
  const int32_t vocab = static_cast<int32_t>(trie->vocab_size());
  std::mt19937_64 rng(42);
  std::vector<uint64_t> mask(trie->mask_words());
  int finished_total = 0, walks_total = 0;
  for (const auto& file : corpus()) {
    std::ifstream in(file);
    ojson doc = ojson::parse(in);
   for (bool strict : {true, false}) {
    // strict: additionalProperties defaults to false (walks finish); otherwise unknown
    // members are allowed and many walks run out of steps.
    auto g = testing::must_compile(json_schema_grammar(doc["schema"], {.strict = strict}));
    nlohmann::json schema_json = nlohmann::json::parse(doc["schema"].dump());
    valijson::Schema schema;
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter schema_adapter(schema_json);
    parser.populateSchema(schema_adapter, schema);
    int finished = 0;
    for (int walk = 0; walk < kWalks; ++walk) {
      Matcher m(g, trie);
      std::string text;
      const bool check_every_token = walk < 2;
      bool done = false;
      for (int step = 0; step < 4000 && !done; ++step) {
        ASSERT_TRUE(m.compute_mask(mask.data()).ok());
        if (check_every_token && step < 300) {
          for (int32_t t = 0; t < vocab; ++t) {
            bool ok = m.accept_token(t).ok();
            ASSERT_EQ(ok, bit(mask, t)) << file.filename() << " token " << t << " after " << text;
            if (ok) m.rollback(1);
          }
        }
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab; ++t) if (bit(mask, t)) allowed.push_back(t);
        ASSERT_FALSE(allowed.empty()) << "dead end after " << text;
        // Past 2000 tokens take EOS whenever it is allowed, so more walks finish.
        int32_t eos = trie->eos_ids()[0];
        int32_t tok = step > 2000 && bit(mask, eos) ? eos : allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(tok).ok());
        if (tok == eos) done = true;
        else text += trie->token_bytes(tok);
      }
      if (!done) continue;
      ++finished;
      ASSERT_TRUE(testing::accepts(g, text)) << text;
      auto parsed = nlohmann::json::parse(text, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << file.filename() << ": not JSON: " << text;
      valijson::Validator validator;
      valijson::adapters::NlohmannJsonAdapter target(parsed);
      EXPECT_TRUE(validator.validate(schema, target, nullptr)) << file.filename() << ": invalid: " << text;
    }
    if (strict) {
      EXPECT_GT(finished, 0) << file.filename();
    }
    finished_total += finished;
    walks_total += kWalks;
   }
  }
  std::printf("random walks finished: %d of %d, all validated\n", finished_total, walks_total);
}

TEST(RandomWalk, RollbackRestoresTheMask) {
  auto trie = synthetic_trie();
  auto g = testing::must_compile(json_schema_grammar(ojson::parse(
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"}}},"required":["a","b"]})")));
  Matcher m(g, trie);
  std::vector<uint64_t> before(trie->mask_words()), after(trie->mask_words());
  std::mt19937_64 rng(7);
  for (int step = 0; step < 30; ++step) {
    ASSERT_TRUE(m.compute_mask(before.data()).ok());
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < static_cast<int32_t>(trie->vocab_size()); ++t) if (bit(before, t) && !trie->is_eos(t)) allowed.push_back(t);
    if (allowed.empty()) break;
    ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]).ok());
    ASSERT_TRUE(m.accept_token(allowed[0]).ok() || true);
    size_t n = m.accepted_count() - static_cast<size_t>(step);
    m.rollback(n);
    ASSERT_TRUE(m.compute_mask(after.data()).ok());
    ASSERT_EQ(before, after) << "step " << step;
    ASSERT_TRUE(m.accept_token(allowed[0]).ok());
  }
}

TEST(RandomWalk, EosOnlyWhenComplete) {
  auto trie = synthetic_trie();
  auto g = testing::must_compile(json_schema_grammar(ojson::parse(R"({"type":"integer"})")));
  Matcher m(g, trie);
  std::vector<uint64_t> mask(trie->mask_words());
  int32_t eos = trie->eos_ids()[0];
  ASSERT_TRUE(m.compute_mask(mask.data()).ok());
  EXPECT_FALSE(bit(mask, eos));
  EXPECT_FALSE(m.accept_token(eos).ok());
  ASSERT_TRUE(m.accept_token('7').ok());
  ASSERT_TRUE(m.compute_mask(mask.data()).ok());
  EXPECT_TRUE(bit(mask, eos));
  EXPECT_TRUE(m.accept_token(eos).ok());
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('1').ok());
}

}  // namespace
}  // namespace spillway::grammar
