// The mask's slice paths for broad byte classes and counted tails (format email / hostname
// labels, a counted pattern, the end of a maxLength string) are exact: at every step of
// random walks biased towards long tokens (so labels and counted strings reach their last
// characters), every mask bit equals "accept_token succeeds", and the mask equals the one
// a matcher without slices (MatcherLimits::use_slices = false, the plain trie walk) computes.
// The walks must actually take the class-slice and exact-count paths.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "test_helpers.h"

namespace spillway::grammar {
namespace {

// Every single byte; alphanumeric runs of 2..24 bytes (so tokens longer and shorter than
// kClassSliceBytes = 16); runs with '-', '.', '@', quotes, commas and braces mixed in;
// leading-space words; UTF-8 characters and runs.
std::shared_ptr<const TokenTrie> class_vocab() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, static_cast<char>(b)));
  std::mt19937_64 rng(7);
  const std::string alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  auto run = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += alnum[rng() % alnum.size()];
    return s;
  };
  for (size_t len = 2; len <= 24; ++len)
    for (int k = 0; k < 30; ++k) v.tokens.push_back(run(len));
  for (int k = 0; k < 200; ++k) {
    const char* mid[] = {"-", ".", "@", "\"", "\",", "\"}", "_", "+", "!", " ", "\\n", "é", "中"};
    v.tokens.push_back(run(1 + rng() % 10) + mid[rng() % std::size(mid)] + run(rng() % 8));
  }
  for (int k = 0; k < 100; ++k) v.tokens.push_back(" " + run(1 + rng() % 8));
  for (const char* t : {"{\"", "\":\"", "\",\"", "\"}", "\": \"", "\", \"", "é", "中文", "\xE4\xB8", "\xAD",
                        "com", ".com", "@example", "example.org", "--", "-a", "a-", "mail", "a.b"})
    v.tokens.push_back(t);
  v.tokens.push_back("");  // EOS
  v.eos_ids = {static_cast<int32_t>(v.tokens.size() - 1)};
  return TokenTrie::build(std::move(v));
}

bool bit(const std::vector<uint64_t>& m, int32_t t) { return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }

TEST(ClassSlice, MasksEqualAcceptAndThePlainWalk) {
  auto trie = class_vocab();
  const auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "email": {"type": "string", "format": "email"},
      "host": {"type": "string", "format": "hostname"},
      "code": {"type": "string", "pattern": "^[A-Za-z0-9]{3,40}$"},
      "note": {"type": "string", "maxLength": 20},
      "emails": {"type": "array", "items": {"type": "string", "format": "email"}}
    },
    "required": ["email", "host", "code", "note", "emails"]
  })");
  auto g = testing::must_compile(json_schema_grammar(schema, {.strict = true}));
  EXPECT_FALSE(g->slice_classes().empty());
  const int32_t vocab = static_cast<int32_t>(trie->vocab_size());
  std::vector<uint64_t> mask(trie->mask_words()), plain(trie->mask_words());
  std::vector<int32_t> allowed, long_allowed;
  std::mt19937_64 rng(2024);
  int class_paths = 0, exact_paths = 0, masks = 0;
  MatcherLimits no_slices;
  no_slices.use_slices = false;
  for (int walk = 0; walk < 16; ++walk) {
    Matcher m(g, trie);
    Matcher ref(g, trie, no_slices);
    std::string text;
    for (int step = 0; step < 400; ++step) {
      MaskStats st;
      ASSERT_TRUE(m.compute_mask(mask.data(), &st).ok());
      ASSERT_TRUE(ref.compute_mask(plain.data()).ok());
      ++masks;
      class_paths += st.class_slice_path;
      exact_paths += st.exact_count_path;
      ASSERT_EQ(mask, plain) << "after " << text;
      allowed.clear();
      long_allowed.clear();
      for (int32_t t = 0; t < vocab; ++t) {
        if (!trie->is_eos(t)) {
          const bool ok = m.accept_token(t).ok();
          if (ok) m.rollback(1);
          ASSERT_EQ(bit(mask, t), ok) << "token '" << trie->token_bytes(t) << "' after " << text;
        }
        if (bit(mask, t)) {
          allowed.push_back(t);
          if (trie->token_bytes(t).size() >= 8) long_allowed.push_back(t);
        }
      }
      ASSERT_FALSE(allowed.empty()) << text;
      // Mostly long tokens: labels and counted strings run up to their limits.
      const int32_t tok = !long_allowed.empty() && rng() % 4 != 0 ? long_allowed[rng() % long_allowed.size()]
                                                                   : allowed[rng() % allowed.size()];
      if (trie->is_eos(tok)) break;
      ASSERT_TRUE(m.accept_token(tok).ok());
      ASSERT_TRUE(ref.accept_token(tok).ok());
      text += trie->token_bytes(tok);
    }
  }
  EXPECT_GT(class_paths, masks / 20) << class_paths << " of " << masks;
  EXPECT_GT(exact_paths, 0) << exact_paths << " of " << masks;
}

}  // namespace
}  // namespace spillway::grammar
