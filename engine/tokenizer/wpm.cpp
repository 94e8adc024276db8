// WordPiece ("bert" vocabularies), as llama.cpp's llm_tokenizer_wpm: the text is lower-cased
// and stripped of accents (BERT's normalizer), split at whitespace, punctuation, ASCII symbols
// and CJK ideographs, and each word, prefixed with "▁", is covered greedily by the longest
// tokens; a word that cannot be covered becomes the unknown token. Character classes come
// from ICU.
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode_text.h"

namespace spillway::engine {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

bool is_chinese_char(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

uint32_t category_mask(uint32_t cp) { return U_MASK(u_charType(static_cast<UChar32>(cp))); }

constexpr uint32_t kControlMask = U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK;

class WpmTokenizer final : public VocabTokenizer {
 public:
  WpmTokenizer(Vocab vocab, bool lowercase, bool strip_accents)
      : VocabTokenizer(std::move(vocab)), lowercase_(lowercase), strip_accents_(strip_accents) {
    UErrorCode status = U_ZERO_ERROR;
    nfd_ = icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status)) nfd_ = nullptr;
    build_piece_cache();
  }

 protected:
  void encode_text(std::string_view raw, bool starts_segment,
                   std::vector<int32_t>& out) const override;

  std::string normal_token_bytes(int32_t id) const override {
    const std::string& text = vocab().texts[id];
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
        out += ' ';
        i += kSpaceMarker.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }

 private:
  // The first code point of the canonical decomposition (llama.cpp keeps only that one).
  uint32_t decomposed_base(uint32_t cp) const {
    if (!nfd_ || cp < 0xC0) return cp;
    icu::UnicodeString decomposition;
    if (!nfd_->getDecomposition(static_cast<UChar32>(cp), decomposition)) return cp;
    return decomposition.isEmpty() ? cp : static_cast<uint32_t>(decomposition.char32At(0));
  }

  std::vector<std::string> words_of(std::string_view text) const;

  bool lowercase_;
  bool strip_accents_;
  const icu::Normalizer2* nfd_ = nullptr;  // owned by ICU
};

std::vector<std::string> WpmTokenizer::words_of(std::string_view text) const {
  std::vector<std::string> words(1);
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = unicode::decode_utf8(text, pos, &cp);
    if (len == 0) {
      cp = unicode::kReplacementChar;
      len = 1;
    }
    pos += len;
    if (strip_accents_) cp = decomposed_base(cp);
    if (u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const uint32_t mask = category_mask(cp);
    if (cp == 0 || cp == unicode::kReplacementChar || (mask & kControlMask)) continue;
    if (strip_accents_ && (mask & U_GC_M_MASK)) continue;
    if (lowercase_) cp = static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp)));
    std::string s;
    unicode::append_utf8(s, cp);
    if ((mask & U_GC_P_MASK) || (cp < 0x7F && (mask & U_GC_S_MASK)) || is_chinese_char(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WpmTokenizer::encode_text(std::string_view raw, bool /*starts_segment*/,
                               std::vector<int32_t>& out) const {
  const Vocab& v = vocab();
  for (const std::string& word : words_of(raw)) {
    if (word.empty()) continue;
    const std::string marked = std::string(kSpaceMarker) + word;
    const size_t n = marked.size();
    const size_t start = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool match = false;
      for (size_t j = std::min(n, i + v.max_token_bytes + 1); j > i; --j) {
        const int32_t id = v.find(std::string_view(marked).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          match = true;
          i = j - 1;
          break;
        }
      }
      if (!match) {
        out.resize(start);
        break;
      }
    }
    if (out.size() == start && v.unk >= 0) out.push_back(v.unk);
  }
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(Vocab vocab, const Metadata& meta,
                                                      std::string_view source_name) {
  auto lowercase = meta.get_bool("tokenizer.ggml.normalizer.lowercase");
  if (!lowercase.ok()) return lowercase.error();
  auto strip = meta.get_bool("tokenizer.ggml.normalizer.strip_accents");
  if (!strip.ok()) return strip.error();
  const bool lower = lowercase->value_or(true);
  const bool strip_accents = strip->value_or(lower);
  return std::unique_ptr<Tokenizer>(
      std::make_unique<WpmTokenizer>(std::move(vocab), lower, strip_accents));
}

}  // namespace spillway::engine
