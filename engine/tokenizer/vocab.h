// The vocabulary shared by every tokenizer kind, read from GGUF tokenizer.* metadata the way
// llama.cpp's llama_vocab::load reads it: token texts, scores and attributes, the special ids
// with llama.cpp's per-model defaults, add_bos / add_eos / add_space_prefix, the
// end-of-generation set and the special tokens matched before tokenization.
//
// Internal to the engine's tokenizer files. Immutable after load_vocab().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "engine/format/model_source.h"

namespace spillway::engine {

enum class VocabKind { Spm, Bpe, Wpm };

// llama.cpp's llama_token_attr bits (a token may carry several).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

// GGUF tokenizer.ggml.token_type values.
enum GgufTokenType : int64_t {
  kTypeUndefined = 0, kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3,
  kTypeUserDefined = 4, kTypeUnused = 5, kTypeByte = 6,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::string model;        // tokenizer.ggml.model
  std::string pre;          // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> texts;
  std::vector<float> scores;       // 0 when the metadata has none
  std::vector<uint32_t> attrs;     // TokenAttr bits
  TokenIndex index;                // text -> id

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_sep = false;
  bool add_space_prefix = false;
  std::vector<uint8_t> eog;        // per id: ends generation
  // Control, user-defined and unknown tokens, longest text first (llama.cpp's special cache).
  std::vector<int32_t> special_by_length;
  size_t max_token_bytes = 0;

  int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
  int32_t find(std::string_view text) const {
    auto it = index.find(text);
    return it == index.end() ? -1 : it->second;
  }
};

// Reads everything but the kind-specific data (merges, pre-tokenizer). add_bos_default is the
// pre-tokenizer's default (llama3 and tekken add BOS). Broken metadata (missing or mistyped
// arrays, lengths that disagree, duplicate tokens, special ids out of range) is an Error that
// names source_name and the key.
Result<Vocab> load_vocab(const Metadata& meta, std::string_view source_name, VocabKind kind,
                         std::string model, std::string pre, bool add_bos_default, bool no_bos);

}  // namespace spillway::engine
