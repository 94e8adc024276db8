// What the concrete tokenizers (SPM, byte-level BPE, WordPiece) share: the vocabulary, the
// special-token split of the input (llama.cpp's tokenizer_st_partition), BOS/EOS, the
// token -> bytes cache and the Tokenizer queries. Each kind supplies only the tokenization of
// a plain piece of text and the bytes of its normal tokens.
//
// Internal to the engine's tokenizer files. Immutable after construction; thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace spillway::engine {

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const final;
  std::string token_bytes(int32_t id, bool include_special) const final;
  const std::string& token_text(int32_t id) const final;
  int32_t n_vocab() const final { return vocab_.n_tokens(); }
  int32_t bos_id() const final { return vocab_.bos; }
  int32_t eos_id() const final { return vocab_.eos; }
  bool add_bos() const final { return vocab_.add_bos; }
  bool add_eos() const final { return vocab_.add_eos; }
  bool add_space_prefix() const final { return vocab_.add_space_prefix; }
  bool is_end_of_generation(int32_t id) const final { return vocab_.valid(id) && vocab_.eog[id]; }
  bool is_special(int32_t id) const final;
  std::optional<int32_t> find_token(std::string_view text) const final;

  const Vocab& vocab() const { return vocab_; }

  // One piece of the input after the special-token split: plain text or a special token.
  struct Fragment {
    std::string_view text;  // empty for a token
    int32_t token = -1;     // >= 0 for a token
  };
  // llama.cpp's special-token split: special token texts are cut out longest first; control
  // and unknown tokens only with parse_special, user-defined ones always; lstrip/rstrip
  // attributes drop the whitespace beside a token.
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

 protected:
  explicit VocabTokenizer(Vocab vocab);
  // Subclass constructors call this last: fills the token -> bytes cache.
  void build_piece_cache();

  // Appends the ids of plain text (no special tokens in it). starts_segment: the text is the
  // first fragment or follows a special token (SentencePiece adds its space prefix there).
  virtual void encode_text(std::string_view text, bool starts_segment,
                           std::vector<int32_t>& out) const = 0;
  // The bytes a token with the normal attribute stands for.
  virtual std::string normal_token_bytes(int32_t id) const = 0;

  // <0xXX> byte tokens: the byte, or -1 when the text is not of that form.
  static int parse_byte_token(std::string_view text);

 private:
  struct SpecialTrie;

  Vocab vocab_;
  std::vector<std::string> pieces_;  // token_bytes(id, include_special = true)
  std::unique_ptr<SpecialTrie> trie_;
  bool has_user_defined_ = false;

 public:
  ~VocabTokenizer() override;
};

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
// Bytes of escaped text the SentencePiece tokenizer merges at once (spm.cpp: exact chunking
// of long texts); SIZE_MAX: no chunking (tests compare the two). Process-wide.
std::atomic<size_t>& spm_chunk_bytes();
// Reads and checks tokenizer.ggml.merges.
Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab,
                                                      std::unique_ptr<PreTokenizer> pretokenizer,
                                                      const Metadata& meta,
                                                      std::string_view source_name);
Result<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(Vocab vocab, const Metadata& meta,
                                                      std::string_view source_name);

}  // namespace spillway::engine
