// Tokenizer behaviour on the real vocabularies: special tokens with parse_special on/off,
// BOS/EOS with add_special, end-of-generation ids, token bytes, decode round trips and the
// streaming detokenizer. Expected ids are looked up by their vocabulary text (find_token), or
// composed from encodings of the plain parts, so they do not come from the code under test's
// own earlier output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/unicode_text.h"
#include "tokenizer_test_util.h"

namespace spillway::engine {
namespace {

using test::testdata;

std::string vocab_path(const std::string& name) {
  return testdata("vocab/ggml-vocab-" + name + ".gguf");
}

int32_t id_of(const Tokenizer& tok, std::string_view text) {
  auto id = tok.find_token(text);
  EXPECT_TRUE(id.has_value()) << "no token '" << text << "'";
  return id.value_or(-1);
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TEST(TokenizerSpecial, SpmControlTokensOnlyWithParseSpecial) {
  auto tok = test::load_tokenizer(vocab_path("llama-spm"));
  ASSERT_TRUE(tok);
  const int32_t hello = id_of(*tok, "\xE2\x96\x81Hello");  // "▁Hello"
  EXPECT_EQ(tok->encode("<s>Hello</s>", false, true), (std::vector<int32_t>{1, hello, 2}));
  const auto plain = tok->encode("<s>Hello</s>", false, false);
  EXPECT_FALSE(contains(plain, 1));
  EXPECT_FALSE(contains(plain, 2));
  EXPECT_EQ(tok->decode(plain, false, /*remove_leading_space=*/true), "<s>Hello</s>");
}

TEST(TokenizerSpecial, BpeControlTokenSplitsTheText) {
  auto tok = test::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(tok);
  const int32_t eot = id_of(*tok, "<|endoftext|>");
  EXPECT_EQ(tok->encode("Hello<|endoftext|> world", false, true),
            concat({tok->encode("Hello", false, false), {eot}, tok->encode(" world", false, false)}));
  const auto plain = tok->encode("Hello<|endoftext|> world", false, false);
  EXPECT_FALSE(contains(plain, eot));
  EXPECT_EQ(tok->decode(plain, false), "Hello<|endoftext|> world");
}

TEST(TokenizerSpecial, UserDefinedTokensAlwaysSplitOut) {
  auto mpt = test::load_tokenizer(vocab_path("mpt"));
  ASSERT_TRUE(mpt);
  const int32_t four_spaces = id_of(*mpt, "    ");
  EXPECT_EQ(mpt->encode("x    y", false, false),
            concat({mpt->encode("x", false, false), {four_spaces}, mpt->encode("y", false, false)}));

  auto coder = test::load_tokenizer(vocab_path("deepseek-coder"));
  ASSERT_TRUE(coder);
  EXPECT_EQ(coder->encode("\xC3\xB5", false, false),
            (std::vector<int32_t>{id_of(*coder, "\xC3\xB5")}));  // "õ" is user-defined
}

TEST(TokenizerSpecial, Phi3StripsWhitespaceAfterSpecialTokens) {
  auto tok = test::load_tokenizer(vocab_path("phi-3"));
  ASSERT_TRUE(tok);
  const int32_t user = id_of(*tok, "<|user|>"), end = id_of(*tok, "<|end|>");
  EXPECT_EQ(tok->encode("<|user|>\nHi<|end|>", false, true),
            (std::vector<int32_t>{user, id_of(*tok, "\xE2\x96\x81Hi"), end}));
  // "</s>" is user-defined in this vocab but an end-of-generation text, hence control.
  EXPECT_FALSE(contains(tok->encode("a</s>", false, false), 2));
  EXPECT_TRUE(contains(tok->encode("a</s>", false, true), 2));
}

TEST(TokenizerSpecial, AddSpecialFollowsMetadataAndDefaults) {
  auto spm = test::load_tokenizer(vocab_path("llama-spm"));
  ASSERT_TRUE(spm);
  const int32_t hello = id_of(*spm, "\xE2\x96\x81Hello");
  EXPECT_TRUE(spm->add_bos());
  EXPECT_FALSE(spm->add_eos());
  EXPECT_EQ(spm->encode("Hello", true, false), (std::vector<int32_t>{1, hello}));
  EXPECT_EQ(spm->encode("Hello", false, false), (std::vector<int32_t>{hello}));
  EXPECT_EQ(spm->encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(spm->encode("", false, false).empty());

  auto gpt2 = test::load_tokenizer(vocab_path("gpt-2"));  // no add_bos_token: gpt2 adds nothing
  ASSERT_TRUE(gpt2);
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_EQ(gpt2->encode("Hello", true, false), gpt2->encode("Hello", false, false));

  auto coder = test::load_tokenizer(vocab_path("deepseek-coder"));  // add_bos_token = true
  ASSERT_TRUE(coder);
  EXPECT_EQ(coder->encode("Hello", true, false),
            concat({{32013}, coder->encode("Hello", false, false)}));

  auto source = test::open_vocab_source(vocab_path("llama-spm"));
  ASSERT_TRUE(source);
  Metadata meta = source->metadata();
  meta.set("tokenizer.ggml.add_eos_token", true);
  meta.set("tokenizer.ggml.add_bos_token", false);
  auto with_eos = Tokenizer::from_metadata(meta, "llama-spm+eos");
  ASSERT_TRUE(with_eos.ok()) << with_eos.error().message;
  EXPECT_EQ((*with_eos)->encode("Hello", true, false), (std::vector<int32_t>{hello, 2}));
  meta.set("tokenizer.ggml.add_space_prefix", false);
  auto no_prefix = Tokenizer::from_metadata(meta, "llama-spm-prefix");
  ASSERT_TRUE(no_prefix.ok());
  EXPECT_EQ((*no_prefix)->encode("Hello", false, false),
            (std::vector<int32_t>{id_of(*spm, "Hello")}));
}

TEST(TokenizerSpecial, EndOfGenerationIds) {
  auto spm = test::load_tokenizer(vocab_path("llama-spm"));
  ASSERT_TRUE(spm);
  EXPECT_TRUE(spm->is_end_of_generation(2));
  EXPECT_FALSE(spm->is_end_of_generation(1));
  EXPECT_FALSE(spm->is_end_of_generation(0));
  EXPECT_FALSE(spm->is_end_of_generation(-1));
  EXPECT_FALSE(spm->is_end_of_generation(1 << 20));

  auto phi3 = test::load_tokenizer(vocab_path("phi-3"));
  ASSERT_TRUE(phi3);
  for (const char* text : {"<|endoftext|>", "<|end|>", "</s>"}) {
    EXPECT_TRUE(phi3->is_end_of_generation(id_of(*phi3, text))) << text;
  }
  EXPECT_FALSE(phi3->is_end_of_generation(id_of(*phi3, "<|assistant|>")));
  EXPECT_FALSE(phi3->is_end_of_generation(id_of(*phi3, "<|user|>")));

  auto gpt2 = test::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(gpt2);
  EXPECT_TRUE(gpt2->is_end_of_generation(50256));
  EXPECT_FALSE(gpt2->is_end_of_generation(id_of(*gpt2, "Hello")));

  // tokenizer.ggml.eot_token_id adds to the set.
  auto source = test::open_vocab_source(vocab_path("llama-spm"));
  ASSERT_TRUE(source);
  Metadata meta = source->metadata();
  meta.set("tokenizer.ggml.eot_token_id", int64_t{13});
  auto with_eot = Tokenizer::from_metadata(meta, "llama-spm+eot");
  ASSERT_TRUE(with_eot.ok());
  EXPECT_TRUE((*with_eot)->is_end_of_generation(13));
  EXPECT_TRUE((*with_eot)->is_end_of_generation(2));
}

TEST(TokenizerDecode, TokenBytesAndText) {
  auto spm = test::load_tokenizer(vocab_path("llama-spm"));
  ASSERT_TRUE(spm);
  const int32_t hello = id_of(*spm, "\xE2\x96\x81Hello");
  EXPECT_EQ(spm->token_text(hello), "\xE2\x96\x81Hello");
  EXPECT_EQ(spm->token_bytes(hello, false), " Hello");
  EXPECT_EQ(spm->token_bytes(id_of(*spm, "<0x41>"), false), "A");
  EXPECT_EQ(spm->token_bytes(1, false), "");
  EXPECT_EQ(spm->token_bytes(1, true), "<s>");
  EXPECT_EQ(spm->token_bytes(-5, true), "");
  EXPECT_EQ(spm->token_text(99999), "");
  EXPECT_TRUE(spm->is_special(1));
  EXPECT_TRUE(spm->is_special(0));
  EXPECT_FALSE(spm->is_special(hello));
  EXPECT_EQ(spm->decode(std::vector<int32_t>{1, hello, 2}, true), " Hello");
  EXPECT_EQ(spm->decode(std::vector<int32_t>{1, hello, 2}, false), "<s> Hello</s>");
  EXPECT_EQ(spm->decode(std::vector<int32_t>{hello}, true, /*remove_leading_space=*/true), "Hello");

  auto gpt2 = test::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(gpt2);
  const int32_t world = id_of(*gpt2, "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(gpt2->token_text(world), "\xC4\xA0world");
  EXPECT_EQ(gpt2->token_bytes(world, false), " world");
  EXPECT_EQ(gpt2->decode(std::vector<int32_t>{world}, true, /*remove_leading_space=*/true),
            " world");  // only SentencePiece adds (and removes) a space prefix
}

// Lossless tokenizers give the input back; BERT lower-cases and drops whitespace, so not it.
class DecodeRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(DecodeRoundTrip, EveryInputComesBack) {
  auto tok = test::load_tokenizer(vocab_path(GetParam()));
  ASSERT_TRUE(tok);
  for (const auto& c : test::read_vocab_cases(vocab_path(GetParam()))) {
    const auto ids = tok->encode(c.input, false, false);
    EXPECT_EQ(tok->decode(ids, false, /*remove_leading_space=*/true), c.input)
        << GetParam() << ": " << test::quoted(c.input);
    StreamingDetokenizer stream(*tok, false);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(unicode::is_valid_utf8(piece));
      streamed += piece;
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, tok->decode(ids, false)) << GetParam() << ": " << test::quoted(c.input);
  }
}

INSTANTIATE_TEST_SUITE_P(Lossless, DecodeRoundTrip,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "starcoder", "refact", "mpt"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(TokenizerDecode, GoldenTextsAndPieces) {
  for (const char* name : {"stories260K", "llama-tiny-peaked-f16"}) {
    auto tok = test::load_tokenizer(testdata(std::string("models/") + name + ".gguf"));
    ASSERT_TRUE(tok);
    std::istringstream lines(test::read_file(testdata(std::string("golden/") + name + ".jsonl")));
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      const auto prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
      const auto pieces = j.at("prompt_pieces").get<std::vector<std::string>>();
      ASSERT_EQ(prompt_tokens.size(), pieces.size());
      for (size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_EQ(tok->token_bytes(prompt_tokens[i], true), pieces[i]) << name;
      }
      // llama-server's content: the generated tokens' pieces, leading space kept.
      const auto tokens = j.at("tokens").get<std::vector<int32_t>>();
      EXPECT_EQ(tok->decode(tokens, true), j.at("text").get<std::string>()) << name;
    }
  }
}

TEST(StreamingDetokenizer, HoldsBackASplitCharacter) {
  auto tok = test::load_tokenizer(vocab_path("llama-spm"));
  ASSERT_TRUE(tok);
  // U+1F999 is no token: byte fallback <0xF0><0x9F><0xA6><0x99> after "▁".
  const auto ids = tok->encode("\xF0\x9F\xA6\x99", false, false);
  const std::vector<int32_t> expected = {id_of(*tok, "\xE2\x96\x81"), id_of(*tok, "<0xF0>"),
                                         id_of(*tok, "<0x9F>"), id_of(*tok, "<0xA6>"),
                                         id_of(*tok, "<0x99>")};
  ASSERT_EQ(ids, expected);
  StreamingDetokenizer stream(*tok, true);
  EXPECT_EQ(stream.push(ids[0]), " ");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(stream.flush(), "");

  // Cut off: flush gives one U+FFFD per byte held back.
  StreamingDetokenizer cut(*tok, true);
  EXPECT_EQ(cut.push(ids[1]), "");
  EXPECT_EQ(cut.push(ids[2]), "");
  EXPECT_EQ(cut.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");

  // A byte that can never start a character is replaced at once, the text after it flows.
  StreamingDetokenizer bad(*tok, true);
  EXPECT_EQ(bad.push(id_of(*tok, "<0xFF>")), "\xEF\xBF\xBD");
  EXPECT_EQ(bad.push(id_of(*tok, "\xE2\x96\x81Hello")), " Hello");

  // Control tokens: text only when not skipped.
  StreamingDetokenizer skip(*tok, true), keep(*tok, false);
  EXPECT_EQ(skip.push(2), "");
  EXPECT_EQ(keep.push(2), "</s>");
}

}  // namespace
}  // namespace spillway::engine
