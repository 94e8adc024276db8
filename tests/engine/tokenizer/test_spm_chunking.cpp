// SentencePiece chunking (issue #20, engine/tokenizer/spm.cpp): long texts are merged in
// chunks cut before a "▁" that follows another character, which must give exactly the ids of
// the unchunked merge. Reference: the same tokenizer with chunking off (spm_chunk_bytes() =
// SIZE_MAX), whose ids the llama.cpp vocab tests (test_tokenizer_vocab.cpp) check; inputs:
// llama.cpp's own vocab test inputs (llama-spm, phi-3), concatenated so every chunk boundary
// lands somewhere new.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer_impl.h"
#include "tokenizer_test_util.h"

namespace spillway::engine {
namespace {

struct ChunkBytes {  // restores the process-wide setting
  size_t saved = spm_chunk_bytes().load();
  ~ChunkBytes() { spm_chunk_bytes().store(saved); }
};

std::vector<int32_t> encode_with_chunk(const Tokenizer& tok, const std::string& text, size_t chunk) {
  spm_chunk_bytes().store(chunk);
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::string long_text(const std::string& path) {
  std::string text;
  for (const test::VocabCase& c : test::read_vocab_cases(path)) text += c.input + "  \n " + c.input + " ";
  while (text.size() < (300u << 10)) text += text;
  return text;
}

TEST(SpmChunking, EqualsTheUnchunkedMergeAtEveryChunkSize) {
  ChunkBytes restore;
  // Both SentencePiece vocabularies of llama.cpp's vocab tests (no token of either holds a
  // "▁" right after another character, so both chunk).
  for (const char* name : {"llama-spm", "phi-3"}) {
    const std::string path = test::testdata(std::string("vocab/ggml-vocab-") + name + ".gguf");
    auto tok = test::load_tokenizer(path);
    ASSERT_TRUE(tok) << name;
    const std::string text = long_text(path);
    const std::vector<int32_t> reference = encode_with_chunk(*tok, text, SIZE_MAX);
    ASSERT_GT(reference.size(), 10000u) << name;
    for (size_t chunk : {size_t{8}, size_t{100}, size_t{4096}, size_t{64} << 10}) {
      EXPECT_EQ(encode_with_chunk(*tok, text, chunk), reference) << name << ", chunk " << chunk;
    }
  }
}

TEST(SpmChunking, RunsOfSpacesAndTextWithoutSpaces) {
  ChunkBytes restore;
  auto tok = test::load_tokenizer(test::testdata("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(tok);
  std::string text;
  for (int i = 0; i < 3000; ++i) {
    text += std::string(static_cast<size_t>(i % 7), ' ') + "word" + std::to_string(i) + (i % 11 == 0 ? "\n" : "");
    if (i % 97 == 0) text += std::string(500, 'x');  // a long run no cut can split
  }
  const std::vector<int32_t> reference = encode_with_chunk(*tok, text, SIZE_MAX);
  for (size_t chunk : {size_t{3}, size_t{16}, size_t{257}, size_t{4096}}) {
    EXPECT_EQ(encode_with_chunk(*tok, text, chunk), reference) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace spillway::engine
