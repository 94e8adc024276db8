// The regex pre-tokenizer of byte-level BPE vocabularies: splits text into the words BPE
// merges run on, chosen by GGUF's tokenizer.ggml.pre.
//
// Each pre-tokenizer is a list of regexes applied one after another: every regex splits each
// piece left by the previous one into its matches and the text between them (Hugging Face's
// Split with behaviour "Isolated"; llama.cpp's unicode_regex_split). The regexes are those of
// the models' tokenizer.json files (which llama.cpp's llama-vocab.cpp also follows), run with
// ICU, so \p{L}, \p{N}, (?i:...), lookahead and possessive quantifiers mean what they mean in
// Hugging Face tokenizers. \s and \S are read as Unicode White_Space (as Rust/Oniguruma and
// llama.cpp do; ICU's own \s leaves out U+000B and U+0085).
//
// Names: default; llama3 = llama-v3 = llama-bpe (and falcon3, falcon-h1, pixtral, midm-2.0,
// lfm2, dbrx, smaug-bpe, chatglm-bpe, glm4); qwen2 (and deepseek-r1-qwen, stablelm2, megrez,
// hunyuan, kormo, grok-2, ...); qwen35; gpt-2 (and mpt, olmo, phi-2, jais, exaone4, roberta-bpe,
// ...); deepseek-llm; deepseek-coder; deepseek-v3; falcon; starcoder, refact (and command-r,
// smollm, codeshell, exaone, minerva-7b); poro-chat, bloom, gpt3-finnish; viking; tekken;
// gpt-4o, llama4; bailingmoe, llada-moe; seed-coder. known_pre_names() lists them all.
//
// Thread contract: a PreTokenizer is immutable after create(); split() is const and may be
// called from any thread concurrently (each call works on its own clone of the compiled regexes).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace spillway::engine {

struct PreTokenizerTraits {
  // A word that is itself a token is emitted whole, without running merges (llama3, tekken).
  bool ignore_merges = false;
  // The tokenizer adds BOS unless tokenizer.ggml.add_bos_token says otherwise (llama3, tekken).
  bool add_bos_default = false;
  // The vocabulary has no BOS (chatglm-bpe, glm4).
  bool no_bos = false;
};

class PreTokenizer {
 public:
  // An unknown name is an Error that lists the known ones; source_name prefixes the message.
  static Result<std::unique_ptr<PreTokenizer>> create(std::string_view pre_name,
                                                      std::string_view source_name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 text into words, appended as (byte offset, byte length), in order,
  // covering the text without gaps; empty pieces are left out.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& words) const;

  const std::string& name() const { return name_; }
  const PreTokenizerTraits& traits() const { return traits_; }

  static std::vector<std::string> known_pre_names();
  // The pre name whose regex list, written as Hugging Face's tokenizer.json expresses it,
  // equals `regexes` (see tokenizer_json.cpp), or nullopt.
  static std::optional<std::string> name_for_hf_regexes(const std::vector<std::string>& regexes);
  // The regex Hugging Face's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's).
  static const std::string& gpt2_regex();

 private:
  struct Compiled;
  PreTokenizer() = default;

  std::string name_;
  PreTokenizerTraits traits_;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace spillway::engine
