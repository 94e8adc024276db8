#include "engine/tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <span>

#include <fmt/format.h>

namespace spillway::engine {

namespace {

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";

uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case kTypeNormal: return kAttrNormal;
    case kTypeUnknown: return kAttrUnknown;
    case kTypeControl: return kAttrControl;
    case kTypeUserDefined: return kAttrUserDefined;
    case kTypeUnused: return kAttrUnused;
    case kTypeByte: return kAttrByte;
    default: return kAttrUndefined;
  }
}

bool text_in(std::string_view text, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

// Texts llama.cpp recognizes when the metadata does not name the token.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>",
                                                                  "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
// Every token with one of these texts ends generation.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};

struct SpecialIdKey {
  std::string_view key;
  int32_t* id;
  bool strict;  // out of range is an Error (else the key is ignored, as llama.cpp warns)
};

}  // namespace

Result<Vocab> load_vocab(const Metadata& meta, std::string_view source_name, VocabKind kind,
                         std::string model, std::string pre, bool add_bos_default, bool no_bos) {
  Vocab v;
  v.kind = kind;
  v.model = std::move(model);
  v.pre = std::move(pre);

  // --- token texts, scores, types
  auto tokens = meta.get_array(kTokensKey);
  if (!tokens.ok()) return tokens.error();
  const MetaArray* tok = *tokens;
  if (!tok) return Error{fmt::format("{}: {} is missing", source_name, kTokensKey)};
  if (tok->kind != MetaArray::Kind::String) {
    return Error{fmt::format("{}: {} is not an array of strings", source_name, kTokensKey)};
  }
  if (tok->strings.empty()) return Error{fmt::format("{}: {} is empty", source_name, kTokensKey)};
  if (tok->strings.size() > static_cast<size_t>(INT32_MAX / 2)) {
    return Error{fmt::format("{}: {} has {} entries, too many", source_name, kTokensKey,
                             tok->strings.size())};
  }
  const size_t n = tok->strings.size();

  auto scores = meta.get_array(kScoresKey);
  if (!scores.ok()) return scores.error();
  if (const MetaArray* sc = *scores) {
    if (sc->kind != MetaArray::Kind::Float && sc->kind != MetaArray::Kind::Int) {
      return Error{fmt::format("{}: {} is not an array of numbers", source_name, kScoresKey)};
    }
    if (sc->size() != n) {
      return Error{fmt::format("{}: {} has {} entries but {} has {}", source_name, kScoresKey,
                               sc->size(), kTokensKey, n)};
    }
    v.scores.resize(n);
    for (size_t i = 0; i < n; ++i) {
      v.scores[i] = static_cast<float>(sc->kind == MetaArray::Kind::Float
                                           ? sc->floats[i]
                                           : static_cast<double>(sc->ints[i]));
    }
  } else {
    v.scores.assign(n, 0.0f);
  }

  auto types = meta.get_array(kTypesKey);
  if (!types.ok()) return types.error();
  v.attrs.assign(n, kAttrNormal);
  if (const MetaArray* ty = *types) {
    if (ty->kind != MetaArray::Kind::Int) {
      return Error{fmt::format("{}: {} is not an array of integers", source_name, kTypesKey)};
    }
    if (ty->size() != n) {
      return Error{fmt::format("{}: {} has {} entries but {} has {}", source_name, kTypesKey,
                               ty->size(), kTokensKey, n)};
    }
    for (size_t i = 0; i < n; ++i) v.attrs[i] = attr_from_type(ty->ints[i]);
  }

  v.texts.resize(n);
  v.index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string text = tok->strings[i];
    if (text.empty()) text = fmt::format("[EMPTY_{}]", i);  // as llama.cpp
    auto [it, inserted] = v.index.emplace(text, static_cast<int32_t>(i));
    if (!inserted) {
      return Error{fmt::format("{}: {} has a duplicate token '{}' (ids {} and {})", source_name,
                               kTokensKey, text, it->second, i)};
    }
    v.max_token_bytes = std::max(v.max_token_bytes, text.size());
    v.texts[i] = std::move(text);
  }

  // --- llama.cpp's defaults per vocabulary kind
  switch (kind) {
    case VocabKind::Spm:
      v.bos = 1, v.eos = 2, v.unk = 0;
      v.add_space_prefix = true, v.add_bos = true, v.add_eos = false;
      break;
    case VocabKind::Bpe:
      v.bos = 11, v.eos = 11;  // llama.cpp's defaults (Falcon's <|endoftext|>)
      v.add_bos = add_bos_default;
      break;
    case VocabKind::Wpm:
      v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0;
      v.add_bos = true, v.add_sep = true;
      break;
  }
  for (int32_t* id : {&v.bos, &v.eos, &v.unk, &v.sep, &v.pad}) {
    if (!v.valid(*id)) *id = -1;
  }
  if (no_bos) v.bos = -1;

  auto prefix = meta.get_bool("tokenizer.ggml.add_space_prefix");
  if (!prefix.ok()) return prefix.error();
  if (*prefix) v.add_space_prefix = **prefix;

  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1, cls = -1;
  const SpecialIdKey id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos, true},
      {"tokenizer.ggml.eos_token_id", &v.eos, true},
      {"tokenizer.ggml.eot_token_id", &v.eot, true},
      {"tokenizer.ggml.eom_token_id", &v.eom, true},
      {"tokenizer.ggml.unknown_token_id", &v.unk, true},
      {"tokenizer.ggml.seperator_token_id", &v.sep, false},
      {"tokenizer.ggml.padding_token_id", &v.pad, false},
      {"tokenizer.ggml.cls_token_id", &cls, false},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad, false},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep, false},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep, false},
  };
  for (const auto& k : id_keys) {
    auto value = meta.get_int(k.key);
    if (!value.ok()) return value.error();
    if (!*value) continue;
    const int64_t id = **value;
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      if (k.strict) {
        return Error{fmt::format("{}: {} = {} is out of range (the vocabulary has {} tokens)",
                                 source_name, k.key, id, n)};
      }
      continue;
    }
    *k.id = static_cast<int32_t>(id);
  }
  if (kind == VocabKind::Wpm && cls >= 0) v.bos = cls;

  for (auto [key, flag] : {std::pair{"tokenizer.ggml.add_bos_token", &v.add_bos},
                           std::pair{"tokenizer.ggml.add_eos_token", &v.add_eos},
                           std::pair{"tokenizer.ggml.add_sep_token", &v.add_sep}}) {
    auto value = meta.get_bool(key);
    if (!value.ok()) return value.error();
    if (*value) *flag = **value;
  }
  if (v.add_bos && v.bos < 0) {
    return Error{fmt::format("{}: tokenizer.ggml.add_bos_token is true, but there is no BOS token "
                             "(tokenizer.ggml.bos_token_id)", source_name)};
  }
  if (v.add_eos && v.eos < 0) {
    return Error{fmt::format("{}: tokenizer.ggml.add_eos_token is true, but there is no EOS token "
                             "(tokenizer.ggml.eos_token_id)", source_name)};
  }
  if (v.add_sep && v.sep < 0) v.add_sep = false;

  // --- tokens recognized by their text (llama.cpp's auto-detection); the lowest id wins.
  auto detect = [&](int32_t& id, std::span<const std::string_view> texts) {
    if (id >= 0) return;
    for (int32_t i = 0; i < v.n_tokens(); ++i) {
      if (text_in(v.texts[i], texts)) {
        id = i;
        v.attrs[i] |= kAttrControl;
        return;
      }
    }
  };
  detect(v.eot, kEotTexts);
  detect(v.eom, kEomTexts);
  detect(fim_pad, kFimPadTexts);
  detect(fim_rep, kFimRepTexts);
  detect(fim_sep, kFimSepTexts);

  for (int32_t i = 0; i < v.n_tokens(); ++i) {
    if ((v.attrs[i] & kAttrControl) && v.texts[i].find("unused") != std::string::npos) {
      v.attrs[i] |= kAttrUnused;
    }
  }

  v.eog.assign(n, 0);
  for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) v.eog[id] = 1;
  }
  for (int32_t i = 0; i < v.n_tokens(); ++i) {
    if (text_in(v.texts[i], kEogTexts)) {
      v.eog[i] = 1;
      v.attrs[i] |= kAttrControl;
    }
  }
  // gpt-oss: these control-looking tokens are always rendered.
  constexpr std::string_view kGptOssRendered[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                  "<|constrain|>"};
  for (int32_t i = 0; i < v.n_tokens(); ++i) {
    if (text_in(v.texts[i], kGptOssRendered)) {
      v.attrs[i] = kAttrUserDefined;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) v.eog[id] = 1;
  }
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = -1;
    for (int32_t i = 0; i < v.n_tokens(); ++i) {
      if (!v.eog[i]) continue;
      const std::string& t = v.texts[i];
      if (t == "<|return|>") has_return = true;
      if (t == "<|call|>" || t == "<|calls|>") has_call = true;
      if (t == "<|flush|>") has_flush = true;
      if (t == "<|end|>") end_id = i;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
      v.eog[end_id] = 0;
      v.attrs[end_id] = kAttrUserDefined;
    }
  }
  // gemma4 / paddleocr: "</s>" is not an end of generation next to "<|tool_response>".
  {
    int32_t tool_response = v.find("<|tool_response>"), s_id = v.find("</s>");
    if (tool_response >= 0 && v.eog[tool_response] && s_id >= 0 && v.eog[s_id]) {
      v.eog[s_id] = 0;
      v.attrs[s_id] = kAttrNormal;
    }
  }

  // --- special tokens matched in the text before tokenization, longest first
  for (int32_t i = 0; i < v.n_tokens(); ++i) {
    if (v.attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v.special_by_length.push_back(i);
    }
  }
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(),
                   [&](int32_t a, int32_t b) { return v.texts[a].size() > v.texts[b].size(); });

  // Phi-3 models strip whitespace after their special tokens (llama.cpp keys this on the name).
  auto name = meta.get_string("general.name");
  if (!name.ok()) return name.error();
  std::string lower_name = name->value_or("");
  std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower_name.find("phi-3") != std::string::npos || lower_name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_by_length) v.attrs[id] |= kAttrRstrip;
    if (int32_t id = v.find("</s>"); id >= 0) v.attrs[id] |= kAttrRstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = v.find(t); id >= 0) v.attrs[id] &= ~static_cast<uint32_t>(kAttrRstrip);
    }
  }
  return v;
}

}  // namespace spillway::engine
