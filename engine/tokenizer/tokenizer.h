// Text <-> token ids, built from GGUF tokenizer.* metadata.
//
// Supported tokenizer.ggml.model values:
//   "llama": SentencePiece BPE (scores, byte fallback <0xXX>, "▁" space marker,
//            add_space_prefix);
//   "gpt2":  byte-level BPE (merges, byte<->unicode map) with the regex pre-tokenizer
//            selected by tokenizer.ggml.pre (default/llama-bpe/llama3, qwen2, gpt-2,
//            deepseek-llm, deepseek-coder, falcon, starcoder, refact, mpt, ...; the full
//            list is in engine/pretokenizer.h). As llama.cpp: an absent tokenizer.ggml.pre
//            means "default"; an unknown one is an Error listing the known names.
//   "bert":  WordPiece (BERT-style lower-casing, accent stripping, punctuation split).
// Hugging Face tokenizer.json is converted into the same metadata keys by
// import_tokenizer_json(), so one implementation serves both formats.
//
// Behaviour follows llama.cpp (llama-vocab.cpp), so ids match llama.cpp's exactly:
// - Special tokens: with parse_special, the texts of control and unknown tokens are cut out
//   of the input first (longest first) and mapped to their ids. User-defined tokens
//   (token_type 4) are cut out whether parse_special is set or not, as llama.cpp and Hugging
//   Face do with added tokens; control tokens are plain text without parse_special.
// - Defaults when the metadata is silent: "llama" adds BOS (not EOS) and a space prefix;
//   "gpt2" adds nothing, except pre-tokenizers llama3/tekken which add BOS; "bert" adds
//   [CLS] ... [SEP]. BOS/EOS ids default to 1/2 ("llama") and 11/11 ("gpt2", llama.cpp's
//   choice).
// - End of generation: EOS, EOT, EOM, FIM pad/repo/file-separator tokens and every token whose
//   text is a well-known end marker (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>,
//   <|endoftext|>, <|return|>, </s>, ...).
// - Invalid UTF-8 in the input is tokenized as llama.cpp does: SentencePiece falls back to
//   byte tokens, byte-level BPE sees U+FFFD for each invalid byte.
// - Decoding does not "clean up tokenization spaces": decode() is exactly the concatenation
//   of token_bytes(), the same text a StreamingDetokenizer produces.
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
#include "engine/format/model_source.h"

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
  // removed from the first token when remove_leading_space is true (as llama.cpp's
  // llama_detokenize). Ids out of range give nothing. May be invalid UTF-8 (a multi-byte
  // character cut off by the end of ids).
  std::string decode(std::span<const int32_t> ids, bool skip_special,
                     bool remove_leading_space = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;   // -1 when none
  virtual int32_t eos_id() const = 0;   // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // Whether encode() puts a space before the text (SentencePiece's add_space_prefix).
  virtual bool add_space_prefix() const { return false; }
  // End-of-generation tokens: EOS, EOT, <|im_end|>, <|eot_id|>, ... (from metadata and
  // well-known texts).
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;  // control / user-defined / unused / unknown
  virtual std::optional<int32_t> find_token(std::string_view text) const = 0;
};

// Turns a stream of token ids into text safely: bytes of an incomplete UTF-8 sequence are
// held back until the sequence completes (or flush()). Everything returned is valid UTF-8:
// bytes that can never complete a sequence are replaced by U+FFFD at once. The text of each
// token is token_bytes(id, !skip_special), leading spaces kept (what llama-server streams).
// Not thread-safe; one per stream.
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
  std::string pending_;
};

// Reads a Hugging Face tokenizer.json (+ tokenizer_config.json beside it when present)
// into GGUF tokenizer.* keys of meta: tokenizer.ggml.model, .tokens, .token_type,
// .merges, .scores, .pre, .bos_token_id, .eos_token_id, .add_bos_token,
// tokenizer.chat_template (and .unknown_token_id, .padding_token_id, .add_eos_token,
// .add_space_prefix when known).
// Supported: model type "BPE", either byte-level (a ByteLevel pre-tokenizer, possibly after
// Split / Digits / Punctuation steps, which must spell one of the known pre-tokenizers:
// becomes "gpt2") or SentencePiece-style (byte_fallback, "▁" from a Metaspace pre-tokenizer
// or Prepend/Replace normalizers: becomes "llama", with scores = -rank of the first merge
// that makes each token). added_tokens: special -> control, others -> user-defined.
// Errors name the file and the key.
Status import_tokenizer_json(const std::string& tokenizer_json_path, Metadata& meta);

}  // namespace spillway::engine
