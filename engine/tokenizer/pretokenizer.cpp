#include "engine/tokenizer/pretokenizer.h"

#include <unicode/uregex.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <string>

#include <fmt/format.h>

#include "engine/tokenizer/unicode_text.h"

namespace spillway::engine {

namespace {

// The regexes as tokenizer.json files write them (non-ASCII characters written \x{HEX} so
// that this file stays ASCII and no editor normalizes them).
const std::string kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
const std::string kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
const std::string kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
const std::string kDeepseekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
const std::string kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kPoro =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
const std::string kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kBailingMoe =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const std::string kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Hugging Face's Punctuation pre-tokenizer (ASCII punctuation or \p{P}), behaviour Contiguous.
const std::string kHfPunctuationRuns = R"([\p{P}\$\+<=>\^~\|`]+)";

struct PreSpec {
  std::vector<std::string_view> names;
  std::vector<std::string> regexes;
  PreTokenizerTraits traits;
  // Further regex lists that Hugging Face tokenizer.json files of these models produce
  // (see name_for_hf_regexes) when they differ from `regexes` but split the same way.
  std::vector<std::vector<std::string>> hf_aliases;
};

const std::vector<PreSpec>& pre_specs() {
  static const std::vector<PreSpec> specs = [] {
    std::vector<PreSpec> s;
    s.push_back({{"default"},
                 {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"},
                 {},
                 {}});
    s.push_back({{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                  "lfm2"},
                 {kLlama3},
                 {.ignore_merges = true, .add_bos_default = true},
                 {}});
    s.push_back({{"dbrx", "smaug-bpe"}, {kLlama3}, {}, {}});
    s.push_back({{"chatglm-bpe", "glm4"}, {kLlama3}, {.no_bos = true}, {}});
    s.push_back({{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan",
                  "solar-open", "grok-2"},
                 {kQwen2},
                 {},
                 {}});
    s.push_back({{"qwen35"}, {kQwen35}, {}, {}});
    s.push_back({{"gpt-2", "mpt", "olmo", "phi-2", "jais", "jina-es", "jina-de", "gigachat",
                  "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4",
                  "trillion", "granite-docling", "jina-v1-en", "jina-v2-code", "roberta-bpe"},
                 {kGpt2},
                 {},
                 {}});
    s.push_back({{"deepseek-llm"},
                 {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk,
                  R"(\p{N}+)"},
                 {},
                 {}});
    s.push_back({{"deepseek-coder"},
                 {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"},
                 {},
                 {}});
    s.push_back({{"deepseek-v3", "hunyuan-dense", "joyai-llm"},
                 {R"(\p{N}{1,3})", kDeepseekV3Cjk, kDeepseekV3Words},
                 {},
                 {}});
    s.push_back({{"falcon"},
                 {kHfPunctuationRuns, kGpt2, "[0-9][0-9][0-9]"},
                 {},
                 {{kHfPunctuationRuns, kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}}});
    s.push_back({{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                  "minerva-7b", "mellum2"},
                 {R"(\p{N})", kGpt2},
                 {},
                 {}});
    s.push_back({{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}, {}, {}});
    s.push_back({{"viking"}, {kPoro, R"(\p{N})"}, {}, {}});
    s.push_back({{"tekken"}, {kTekken}, {.ignore_merges = true, .add_bos_default = true}, {}});
    s.push_back({{"gpt-4o", "llama4", "minimax-m2"}, {kGpt4o}, {}, {}});
    s.push_back({{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingMoe}, {}, {}});
    s.push_back({{"seed-coder"}, {kSeedCoder}, {}, {}});
    return s;
  }();
  return specs;
}

// ICU's \s is [\t\n\f\r\p{Z}]; tokenizers mean Unicode White_Space (which adds U+000B and
// U+0085 and drops nothing a tokenizer relies on).
std::string with_unicode_whitespace(const std::string& regex) {
  std::string out;
  out.reserve(regex.size() + 32);
  for (size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] == '\\' && i + 1 < regex.size()) {
      const char next = regex[i + 1];
      if (next == 's') {
        out += R"(\p{White_Space})";
      } else if (next == 'S') {
        out += R"(\P{White_Space})";
      } else {
        out += regex[i];
        out += next;
      }
      ++i;
      continue;
    }
    out += regex[i];
  }
  return out;
}

// Writes non-ASCII characters as \x{HEX} (uppercase, no leading zeros) and tab, CR and LF as
// \t, \r, \n, so regexes from tokenizer.json compare equal to the table above.
std::string escape_non_ascii(const std::string& regex) {
  std::string out;
  uint32_t cp = 0;
  for (size_t pos = 0; pos < regex.size();) {
    const size_t len = unicode::decode_utf8(regex, pos, &cp);
    if (len == 0) {  // not UTF-8: cannot match anything in the table
      out += regex[pos++];
      continue;
    }
    if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += fmt::format("\\x{{{:X}}}", cp);
    }
    pos += len;
  }
  return out;
}

struct RegexCloser {
  void operator()(URegularExpression* re) const { uregex_close(re); }
};
using RegexPtr = std::unique_ptr<URegularExpression, RegexCloser>;

// UTF-16 copy of a valid UTF-8 text, with the byte offset of each code unit (and of the end).
struct Utf16Text {
  std::u16string units;
  std::vector<uint32_t> byte_offset;
};

Utf16Text to_utf16(std::string_view text) {
  Utf16Text t;
  t.units.reserve(text.size());
  t.byte_offset.reserve(text.size() + 1);
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = unicode::decode_utf8(text, pos, &cp);
    if (len == 0) {  // callers pass valid UTF-8; stay safe anyway
      cp = unicode::kReplacementChar;
      len = 1;
    }
    if (cp < 0x10000) {
      t.units.push_back(static_cast<char16_t>(cp));
      t.byte_offset.push_back(static_cast<uint32_t>(pos));
    } else {
      t.units.push_back(static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10)));
      t.units.push_back(static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF)));
      t.byte_offset.push_back(static_cast<uint32_t>(pos));
      t.byte_offset.push_back(static_cast<uint32_t>(pos));
    }
    pos += len;
  }
  t.byte_offset.push_back(static_cast<uint32_t>(text.size()));
  return t;
}

// Texts are split in chunks of at most this many bytes (at code point boundaries), so
// UTF-16 indexes fit ICU's int32_t and byte offsets fit uint32_t.
constexpr size_t kMaxChunkBytes = size_t{1} << 28;

}  // namespace

struct PreTokenizer::Compiled {
  RegexPtr regex;
};

PreTokenizer::~PreTokenizer() = default;

const std::string& PreTokenizer::gpt2_regex() { return kGpt2; }

std::vector<std::string> PreTokenizer::known_pre_names() {
  std::vector<std::string> names;
  for (const auto& spec : pre_specs()) {
    for (auto n : spec.names) names.emplace_back(n);
  }
  return names;
}

std::optional<std::string> PreTokenizer::name_for_hf_regexes(
    const std::vector<std::string>& regexes) {
  std::vector<std::string> escaped;
  for (const auto& r : regexes) escaped.push_back(escape_non_ascii(r));
  for (const auto& spec : pre_specs()) {
    if (spec.names.front() == "default") continue;  // no tokenizer.json spells this one
    if (spec.regexes == escaped) return std::string(spec.names.front());
    for (const auto& alias : spec.hf_aliases) {
      if (alias == escaped) return std::string(spec.names.front());
    }
  }
  return std::nullopt;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::string_view pre_name,
                                                           std::string_view source_name) {
  const PreSpec* found = nullptr;
  for (const auto& spec : pre_specs()) {
    if (std::find(spec.names.begin(), spec.names.end(), pre_name) != spec.names.end()) {
      found = &spec;
      break;
    }
  }
  if (!found) {
    return Error{fmt::format(
        "{}: unknown pre-tokenizer tokenizer.ggml.pre = '{}' (known: {})", source_name, pre_name,
        fmt::join(known_pre_names(), ", "))};
  }
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  pre->name_ = std::string(pre_name);
  pre->traits_ = found->traits;
  for (const auto& regex : found->regexes) {
    const Utf16Text pattern = to_utf16(with_unicode_whitespace(regex));
    UErrorCode status = U_ZERO_ERROR;
    UParseError parse_error{};
    RegexPtr compiled(uregex_open(reinterpret_cast<const UChar*>(pattern.units.data()),
                                  static_cast<int32_t>(pattern.units.size()), 0, &parse_error,
                                  &status));
    // The table is ours: a regex ICU rejects is a bug, not bad input.
    assert(U_SUCCESS(status) && "pre-tokenizer regex does not compile");
    if (U_FAILURE(status)) {
      return Error{fmt::format("{}: pre-tokenizer '{}': regex does not compile ({}): {}",
                               source_name, pre_name, u_errorName(status), regex)};
    }
    // Backtracking state grows with the word length; prompts are bounded by the caller.
    uregex_setStackLimit(compiled.get(), 0, &status);
    pre->regexes_.push_back(std::make_unique<Compiled>(Compiled{std::move(compiled)}));
  }
  return pre;
}

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<size_t, size_t>>& words) const {
  if (text.size() > kMaxChunkBytes) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = std::min(text.size(), start + kMaxChunkBytes);
      while (end < text.size() && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
      const size_t first = words.size();
      split(text.substr(start, end - start), words);
      for (size_t i = first; i < words.size(); ++i) words[i].first += start;
      start = end;
    }
    return;
  }
  if (text.empty()) return;
  const Utf16Text u16 = to_utf16(text);
  const auto n16 = static_cast<int32_t>(u16.units.size());

  using Range = std::pair<int32_t, int32_t>;  // [begin, end) in UTF-16 units
  std::vector<Range> pieces{{0, n16}};
  std::vector<Range> next;
  for (const auto& compiled : regexes_) {
    UErrorCode status = U_ZERO_ERROR;
    RegexPtr re(uregex_clone(compiled->regex.get(), &status));
    uregex_setText(re.get(), reinterpret_cast<const UChar*>(u16.units.data()), n16, &status);
    if (U_FAILURE(status)) continue;  // out of memory: leave this split out
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const Range& piece : pieces) {
      status = U_ZERO_ERROR;
      uregex_setRegion(re.get(), piece.first, piece.second, &status);
      int32_t prev = piece.first;
      while (U_SUCCESS(status) && uregex_findNext(re.get(), &status)) {
        const int32_t begin = uregex_start(re.get(), 0, &status);
        const int32_t end = uregex_end(re.get(), 0, &status);
        if (U_FAILURE(status) || end <= begin) continue;
        if (begin > prev) next.emplace_back(prev, begin);
        next.emplace_back(begin, end);
        prev = end;
      }
      if (piece.second > prev) next.emplace_back(prev, piece.second);
    }
    pieces.swap(next);
  }
  for (const Range& piece : pieces) {
    const size_t begin = u16.byte_offset[piece.first];
    const size_t end = u16.byte_offset[piece.second];
    if (end > begin) words.emplace_back(begin, end - begin);
  }
}

}  // namespace spillway::engine
