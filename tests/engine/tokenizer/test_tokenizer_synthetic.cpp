// Tokenizers built from hand-made metadata: the merge rules worked out by hand, broken
// metadata rejected with a message naming the key, pre-tokenizer splits checked against
// hand-split text, concurrent use, and a printed (not asserted) speed figure.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/tokenizer/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace spillway::engine {
namespace {

MetaArray strings(std::vector<std::string> v) {
  MetaArray a;
  a.kind = MetaArray::Kind::String;
  a.strings = std::move(v);
  return a;
}
MetaArray ints(std::vector<int64_t> v) {
  MetaArray a;
  a.kind = MetaArray::Kind::Int;
  a.ints = std::move(v);
  return a;
}
MetaArray floats(std::vector<double> v) {
  MetaArray a;
  a.kind = MetaArray::Kind::Float;
  a.floats = std::move(v);
  return a;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's byte alphabet, written out from its definition.
std::vector<std::string> byte_letters() {
  std::vector<std::string> letters(256);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    letters[b] = utf8(self ? b : 256 + next++);
  }
  return letters;
}

// Byte-level BPE: the 256 letters, then merged tokens, then <|endoftext|>.
struct BpeFixture {
  Metadata meta;
  int32_t he, ll, llo, hello, g_w, endoftext;  // ids
};

BpeFixture bpe_fixture() {
  BpeFixture f;
  std::vector<std::string> tokens = byte_letters();
  auto add = [&](std::string t) {
    tokens.push_back(std::move(t));
    return static_cast<int32_t>(tokens.size() - 1);
  };
  f.he = add("he");
  f.ll = add("ll");
  f.llo = add("llo");
  f.hello = add("hello");
  f.g_w = add("\xC4\xA0w");  // "Ġw"
  f.endoftext = add("<|endoftext|>");
  std::vector<int64_t> types(tokens.size(), 1);
  types[f.endoftext] = 3;
  f.meta.set("tokenizer.ggml.model", std::string("gpt2"));
  f.meta.set("tokenizer.ggml.pre", std::string("gpt-2"));
  f.meta.set("tokenizer.ggml.tokens", strings(tokens));
  f.meta.set("tokenizer.ggml.token_type", ints(types));
  // "l l" ranks before "h e"; "ll o" before "he llo".
  f.meta.set("tokenizer.ggml.merges",
             strings({"l l", "h e", "ll o", "he llo", "\xC4\xA0 w"}));
  f.meta.set("tokenizer.ggml.bos_token_id", int64_t{f.endoftext});
  f.meta.set("tokenizer.ggml.eos_token_id", int64_t{f.endoftext});
  return f;
}

// SentencePiece: <unk> <s> </s>, 256 byte tokens, then pieces with hand-picked scores.
struct SpmFixture {
  Metadata meta;
  int32_t space, a, b, c, ab, bc, space_a, abc;
};

SpmFixture spm_fixture() {
  SpmFixture f;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<double> scores = {0, 0, 0};
  std::vector<int64_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  auto add = [&](std::string t, double score) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(1);
    return static_cast<int32_t>(tokens.size() - 1);
  };
  f.space = add("\xE2\x96\x81", -10);
  f.a = add("a", -11);
  f.b = add("b", -12);
  f.c = add("c", -13);
  f.ab = add("ab", -5);
  f.bc = add("bc", -1);
  f.space_a = add("\xE2\x96\x81" "a", -4);
  f.abc = add("abc", -3);
  f.meta.set("tokenizer.ggml.model", std::string("llama"));
  f.meta.set("tokenizer.ggml.tokens", strings(tokens));
  f.meta.set("tokenizer.ggml.scores", floats(scores));
  f.meta.set("tokenizer.ggml.token_type", ints(types));
  return f;
}

std::unique_ptr<Tokenizer> make(const Metadata& meta) {
  auto tok = Tokenizer::from_metadata(meta, "synthetic");
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(*tok) : nullptr;
}

TEST(SyntheticBpe, MergesByRank) {
  BpeFixture f = bpe_fixture();
  auto tok = make(f.meta);
  ASSERT_TRUE(tok);
  // h e l l o: "l l" (rank 0), "h e" (1), "ll o" (2), "he llo" (3) -> one token.
  EXPECT_EQ(tok->encode("hello", false, false), (std::vector<int32_t>{f.hello}));
  // "hell": he + ll, "ll o" needs an o.
  EXPECT_EQ(tok->encode("hell", false, false), (std::vector<int32_t>{f.he, f.ll}));
  // GPT-2 regex: " w" is one word, byte ' ' is the letter Ġ.
  EXPECT_EQ(tok->encode("hello w", false, false), (std::vector<int32_t>{f.hello, f.g_w}));
  // Bytes stand for themselves in the alphabet: 'x' (0x78) is token 0x78.
  EXPECT_EQ(tok->encode("x", false, false), (std::vector<int32_t>{0x78}));
  EXPECT_EQ(tok->encode("hello<|endoftext|>", false, true),
            (std::vector<int32_t>{f.hello, f.endoftext}));
  EXPECT_EQ(tok->decode(tok->encode("h\xC3\xA9llo w\n", false, false), false), "h\xC3\xA9llo w\n");
  // Invalid UTF-8 reaches BPE as U+FFFD (EF BF BD), one per bad byte.
  EXPECT_EQ(tok->encode("\xFF", false, false), (std::vector<int32_t>{0xEF, 0xBF, 0xBD}));
  EXPECT_TRUE(tok->is_end_of_generation(f.endoftext));
}

TEST(SyntheticSpm, MergesByScoreAndFallsBackToBytes) {
  SpmFixture f = spm_fixture();
  auto tok = make(f.meta);
  ASSERT_TRUE(tok);
  // "▁abc": pairs ▁a (-4), ab (-5), bc (-1): bc first; then ▁a (-4) vs abc (-3): abc.
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{f.space, f.abc}));
  // "▁ab": ▁a (-4) beats ab (-5); "▁ab" is no token.
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<int32_t>{f.space_a, f.b}));
  // 'd' is no piece: byte token <0x64> = id 3 + 0x64.
  EXPECT_EQ(tok->encode("ad", false, false), (std::vector<int32_t>{f.space_a, 3 + 0x64}));
  EXPECT_EQ(tok->encode("ab", true, false), (std::vector<int32_t>{1, f.space_a, f.b}));
  EXPECT_EQ(tok->decode(tok->encode("ad c", false, false), false, true), "ad c");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

void expect_error(const Metadata& meta, const std::vector<std::string>& words) {
  auto tok = Tokenizer::from_metadata(meta, "model.gguf");
  ASSERT_FALSE(tok.ok()) << "accepted broken metadata";
  for (const auto& w : words) {
    EXPECT_NE(tok.error().message.find(w), std::string::npos)
        << "'" << w << "' not in: " << tok.error().message;
  }
}

TEST(TokenizerErrors, BrokenMetadataIsAnError) {
  {
    SpmFixture f = spm_fixture();
    Metadata m;
    expect_error(m, {"model.gguf", "tokenizer.ggml.model"});
    m.set("tokenizer.ggml.model", std::string("llama"));
    expect_error(m, {"model.gguf", "tokenizer.ggml.tokens", "missing"});
    m.set("tokenizer.ggml.tokens", ints({1, 2, 3}));
    expect_error(m, {"tokenizer.ggml.tokens"});
    m = f.meta;
    m.set("tokenizer.ggml.scores", floats({0, 1}));
    expect_error(m, {"tokenizer.ggml.scores", "2"});
    m = f.meta;
    m.set("tokenizer.ggml.token_type", ints({1}));
    expect_error(m, {"tokenizer.ggml.token_type"});
    m = f.meta;
    m.set("tokenizer.ggml.bos_token_id", int64_t{100000});
    expect_error(m, {"tokenizer.ggml.bos_token_id", "100000", "out of range"});
    m = f.meta;
    m.set("tokenizer.ggml.eos_token_id", int64_t{-3});
    expect_error(m, {"tokenizer.ggml.eos_token_id"});
    m = f.meta;
    m.set("tokenizer.ggml.bos_token_id", std::string("one"));
    expect_error(m, {"tokenizer.ggml.bos_token_id"});
    m = f.meta;
    m.set("tokenizer.ggml.tokens", strings({"a", "b", "a"}));
    m.set("tokenizer.ggml.scores", floats({0, 0, 0}));
    m.set("tokenizer.ggml.token_type", ints({1, 1, 1}));
    expect_error(m, {"duplicate", "'a'"});
    m = f.meta;
    m.set("tokenizer.ggml.model", std::string("rwkv"));
    expect_error(m, {"rwkv", "llama, gpt2"});
  }
  {
    BpeFixture f = bpe_fixture();
    Metadata m = f.meta;
    m.set("tokenizer.ggml.merges", strings({"l l", "q zz"}));
    expect_error(m, {"tokenizer.ggml.merges[1]", "zz"});
    m.set("tokenizer.ggml.merges", strings({"lonely"}));
    expect_error(m, {"tokenizer.ggml.merges[0]"});
    m.set("tokenizer.ggml.merges", strings({"x y"}));  // "xy" is no token
    expect_error(m, {"tokenizer.ggml.merges[0]", "xy"});
    m = f.meta;
    m.set("tokenizer.ggml.merges", ints({1}));
    expect_error(m, {"tokenizer.ggml.merges"});
    m = f.meta;
    m.set("tokenizer.ggml.pre", std::string("no-such-pre"));
    expect_error(m, {"no-such-pre", "qwen2", "llama3", "deepseek-coder"});
    m = f.meta;
    m.set("tokenizer.ggml.add_eos_token", true);
    m.set("tokenizer.ggml.eos_token_id", int64_t{-1});
    expect_error(m, {"tokenizer.ggml.eos_token_id"});

    Metadata no_merges;
    for (const auto& [key, value] : f.meta.all()) {
      if (key != "tokenizer.ggml.merges") no_merges.set(key, value);
    }
    expect_error(no_merges, {"tokenizer.ggml.merges", "missing"});
    no_merges.set("tokenizer.ggml.merges", strings({}));
    EXPECT_TRUE(Tokenizer::from_metadata(no_merges, "model.gguf").ok());
  }
}

std::vector<std::string> split_words(const char* pre, const std::string& text) {
  auto p = PreTokenizer::create(pre, "test");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  std::vector<std::pair<size_t, size_t>> ranges;
  if (p.ok()) (*p)->split(text, ranges);
  std::vector<std::string> words;
  size_t covered = 0;
  for (auto [offset, length] : ranges) {
    EXPECT_EQ(offset, covered) << "pieces must tile the text";
    covered = offset + length;
    words.push_back(text.substr(offset, length));
  }
  EXPECT_EQ(covered, text.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, SplitsAsTheRegexesSay) {
  const std::string text = "Hello world's 12345  \n\n x";
  EXPECT_EQ(split_words("llama3", text),
            (Words{"Hello", " world", "'s", " ", "123", "45", "  \n\n", " x"}));
  EXPECT_EQ(split_words("gpt-2", text), (Words{"Hello", " world", "'s", " 12345", "  \n\n", " x"}));
  EXPECT_EQ(split_words("qwen2", "ab 12"), (Words{"ab", " ", "1", "2"}));
  EXPECT_EQ(split_words("starcoder", "x 42"), (Words{"x", " ", "4", "2"}));
  // llama3 matches contractions case-insensitively, gpt-2 does not.
  EXPECT_EQ(split_words("llama3", "I'LL"), (Words{"I", "'LL"}));
  EXPECT_EQ(split_words("gpt-2", "I'LL"), (Words{"I", "'", "LL"}));
  // \s is Unicode White_Space: U+000B is whitespace (ICU's own \s would say no).
  EXPECT_EQ(split_words("gpt-2", "a \x0B" "b"), (Words{"a", " ", "\x0B", "b"}));
  // deepseek-coder isolates CJK runs and single digits.
  EXPECT_EQ(split_words("deepseek-coder", "\xE6\x88\x91\xE6\x83\xB3x12"),
            (Words{"\xE6\x88\x91\xE6\x83\xB3", "x", "1", "2"}));
  EXPECT_TRUE(split_words("gpt-2", "").empty());
}

TEST(PreTokenizer, UnknownNameListsKnownOnes) {
  auto p = PreTokenizer::create("nonsense", "m.gguf");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("m.gguf"), std::string::npos);
  EXPECT_NE(p.error().message.find("deepseek-llm"), std::string::npos);
  for (const auto& name : PreTokenizer::known_pre_names()) {
    EXPECT_TRUE(PreTokenizer::create(name, "m.gguf").ok()) << name;
  }
}

TEST(TokenizerThreads, ConcurrentEncodeGivesTheSameIds) {
  auto tok = test::load_tokenizer(test::testdata("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(tok);
  const auto cases = test::read_vocab_cases(test::testdata("vocab/ggml-vocab-gpt-2.gguf"));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (const auto& c : cases) mismatches[t] += tok->encode(c.input, false, false) != c.expected;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// Speed is printed, not asserted (shared machines). The checks only make sure the long
// inputs tokenize and decode back.
TEST(TokenizerSpeed, LongPromptsPrintTokensPerSecond) {
  std::string text;
  for (const auto& c : test::read_vocab_cases(test::testdata("vocab/ggml-vocab-gpt-2.gguf"))) {
    text += c.input + "\n";
  }
  ASSERT_FALSE(text.empty()) << "no vocab cases read from the test data";
  std::string prose;
  while (prose.size() < 100000) prose += text;
  prose.resize(100000);
  while (!prose.empty() && (static_cast<uint8_t>(prose.back()) & 0xC0) == 0x80) prose.pop_back();
  if (!prose.empty() && static_cast<uint8_t>(prose.back()) >= 0xC0) prose.pop_back();
  const std::string one_word(100000, 'a');  // a single 100 KB word: no O(n^2) merging
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm", "mpt"}) {
    auto tok = test::load_tokenizer(test::testdata(std::string("vocab/ggml-vocab-") + name + ".gguf"));
    ASSERT_TRUE(tok);
    for (const std::string* input : std::vector<const std::string*>{&prose, &one_word}) {
      const auto start = std::chrono::steady_clock::now();
      const auto ids = tok->encode(*input, false, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << "[ speed  ] " << name << ", " << input->size() / 1000 << " KB "
                << (input == &prose ? "mixed text" : "one word") << ": " << ids.size()
                << " tokens in " << s * 1000 << " ms = " << ids.size() / s / 1e6 << " M tokens/s ("
                << input->size() / s / 1e6 << " MB/s)\n";
      EXPECT_EQ(tok->decode(ids, false, true), *input) << name;
    }
  }
}

}  // namespace
}  // namespace spillway::engine
