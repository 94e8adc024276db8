// Text <-> token ids, built from GGUF tokenizer.* metadata.
//
// Supported tokenizer.ggml.model values:
//   "llama": SentencePiece BPE (scores, byte fallback <0xXX>, "▁" space marker,
//            add_space_prefix);
//   "gpt2":  byte-level BPE (merges, byte<->unicode map) with the regex pre-tokenizer
//            selected by tokenizer.ggml.pre (default/llama-bpe/llama3, qwen2, gpt-2,
//            deepseek-llm, deepseek-coder, falcon, starcoder, refact, mpt, ...).
// Hugging Face tokenizer.json is converted into the same metadata keys by
// import_tokenizer_json(), so one implementation serves both formats.
//
// Thread contract: a Tokenizer is immutable after construction; encode/decode are
// const and safe to call from any thread concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/model_source.h"

namespace spillway::engine {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // source_name is used in error messages (the model path).
  static Result<std::unique_ptr<Tokenizer>> from_metadata(const Metadata& meta,
                                                          std::string_view source_name);

  // add_special: prepend BOS / append EOS as the metadata's add_bos_token /
  // add_eos_token say. parse_special: map the text of special/control tokens
  // ("<|im_start|>", "<s>") to their ids; otherwise they are tokenized as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // The bytes one token stands for (SPM "▁" -> ' ', byte tokens -> that byte, byte-level
  // BPE unmapped). May be a partial UTF-8 sequence. Control tokens give their text only
  // when include_special is true, else "".
  virtual std::string token_bytes(int32_t id, bool include_special) const = 0;
  // The vocabulary entry itself, as stored ("▁Hello", "Ġworld", "<s>").
  virtual const std::string& token_text(int32_t id) const = 0;

  // Concatenated token_bytes; for SPM, the leading space added by add_space_prefix is
  // removed from the first token when remove_leading_space is true (as llama.cpp).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;   // -1 when none
  virtual int32_t eos_id() const = 0;   // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // End-of-generation tokens: EOS, EOT, <|im_end|>, <|eot_id|>, ... (from metadata and
  // well-known texts).
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;  // control / user-defined / unused
  virtual std::optional<int32_t> find_token(std::string_view text) const = 0;
};

// Turns a stream of token ids into text safely: bytes of an incomplete UTF-8 sequence are
// held back until the sequence completes (or flush()).
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is held back (invalid UTF-8 is replaced by U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool first_ = true;
  std::string pending_;
};

// Reads a Hugging Face tokenizer.json (+ tokenizer_config.json beside it when present)
// into GGUF tokenizer.* keys of meta: tokenizer.ggml.model, .tokens, .token_type,
// .merges, .scores, .pre, .bos_token_id, .eos_token_id, .add_bos_token,
// tokenizer.chat_template.
Status import_tokenizer_json(const std::string& tokenizer_json_path, Metadata& meta);

}  // namespace spillway::engine
