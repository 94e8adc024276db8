// Tokenizer::from_metadata, the shared VocabTokenizer (special-token split, BOS/EOS, token
// bytes), decode and StreamingDetokenizer.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cctype>

#include <fmt/format.h>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode_text.h"

namespace spillway::engine {

// ---------------------------------------------------------------- factory

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_metadata(const Metadata& meta,
                                                            std::string_view source_name) {
  auto model = meta.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  if (!*model) return Error{fmt::format("{}: tokenizer.ggml.model is missing", source_name)};
  auto pre = meta.get_string("tokenizer.ggml.pre");
  if (!pre.ok()) return pre.error();
  std::string pre_name = pre->value_or("");
  if (pre_name.empty()) pre_name = "default";  // llama.cpp warns and uses "default"

  const std::string& m = **model;
  if (m == "llama") {
    auto vocab = load_vocab(meta, source_name, VocabKind::Spm, m, pre_name, true, false);
    if (!vocab.ok()) return vocab.error();
    return make_spm_tokenizer(std::move(*vocab));
  }
  if (m == "gpt2") {
    auto pretokenizer = PreTokenizer::create(pre_name, source_name);
    if (!pretokenizer.ok()) return pretokenizer.error();
    const PreTokenizerTraits traits = (*pretokenizer)->traits();
    auto vocab = load_vocab(meta, source_name, VocabKind::Bpe, m, pre_name,
                            traits.add_bos_default, traits.no_bos);
    if (!vocab.ok()) return vocab.error();
    return make_bpe_tokenizer(std::move(*vocab), std::move(*pretokenizer), meta, source_name);
  }
  if (m == "bert") {
    auto vocab = load_vocab(meta, source_name, VocabKind::Wpm, m, pre_name, true, false);
    if (!vocab.ok()) return vocab.error();
    return make_wpm_tokenizer(std::move(*vocab), meta, source_name);
  }
  return Error{fmt::format("{}: unsupported tokenizer.ggml.model '{}' (supported: llama, gpt2, bert)",
                           source_name, m)};
}

// ---------------------------------------------------------------- special-token split

// A byte trie over the texts of the special tokens; a node ending a text holds the token's
// place in Vocab::special_by_length.
struct VocabTokenizer::SpecialTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t rank = -1;
  };
  std::vector<Node> nodes{Node{}};
  std::array<bool, 256> first_byte{};

  void insert(std::string_view text, int32_t rank) {
    int32_t node = 0;
    for (char c : text) {
      const auto b = static_cast<uint8_t>(c);
      auto& ch = nodes[node].children;
      auto it = std::lower_bound(ch.begin(), ch.end(), std::pair<uint8_t, int32_t>{b, -1});
      if (it != ch.end() && it->first == b) {
        node = it->second;
      } else {
        const auto next = static_cast<int32_t>(nodes.size());
        ch.insert(it, {b, next});
        nodes.emplace_back();
        node = next;
      }
    }
    nodes[node].rank = rank;
    if (!text.empty()) first_byte[static_cast<uint8_t>(text[0])] = true;
  }

  int32_t child(int32_t node, uint8_t b) const {
    const auto& ch = nodes[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::pair<uint8_t, int32_t>{b, -1});
    return it != ch.end() && it->first == b ? it->second : -1;
  }
};

VocabTokenizer::VocabTokenizer(Vocab vocab)
    : vocab_(std::move(vocab)), trie_(std::make_unique<SpecialTrie>()) {
  for (size_t r = 0; r < vocab_.special_by_length.size(); ++r) {
    const int32_t id = vocab_.special_by_length[r];
    trie_->insert(vocab_.texts[id], static_cast<int32_t>(r));
    if (!(vocab_.attrs[id] & (kAttrControl | kAttrUnknown))) has_user_defined_ = true;
  }
}

VocabTokenizer::~VocabTokenizer() = default;

std::vector<VocabTokenizer::Fragment> VocabTokenizer::split_special(std::string_view text,
                                                                    bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  if (vocab_.special_by_length.empty() || (!parse_special && !has_user_defined_)) {
    fragments.push_back({text, -1});
    return fragments;
  }
  auto eligible = [&](int32_t id) {
    return parse_special || !(vocab_.attrs[id] & (kAttrControl | kAttrUnknown));
  };

  // Every occurrence of every eligible special token, ordered as llama.cpp visits them: by
  // the token's place in special_by_length, then left to right.
  struct Occurrence {
    int32_t rank;
    size_t pos;
  };
  std::vector<Occurrence> occurrences;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!trie_->first_byte[bytes[pos]]) continue;
    int32_t node = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      node = trie_->child(node, bytes[k]);
      if (node < 0) break;
      const int32_t rank = trie_->nodes[node].rank;
      if (rank >= 0 && eligible(vocab_.special_by_length[rank])) occurrences.push_back({rank, pos});
    }
  }
  if (occurrences.empty()) {
    fragments.push_back({text, -1});
    return fragments;
  }
  std::sort(occurrences.begin(), occurrences.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });

  // Claim bytes: a special token claims its text (if still free), lstrip/rstrip drop the
  // whitespace beside it inside the same free run.
  enum : uint8_t { kFree = 0, kTaken = 1, kDropped = 2 };
  std::vector<uint8_t> state(text.size(), kFree);
  std::vector<std::pair<size_t, int32_t>> accepted;  // (pos, token)
  for (const Occurrence& occ : occurrences) {
    const int32_t id = vocab_.special_by_length[occ.rank];
    const size_t len = vocab_.texts[id].size();
    bool free = true;
    for (size_t i = occ.pos; i < occ.pos + len; ++i) {
      if (state[i] != kFree) {
        free = false;
        break;
      }
    }
    if (!free) continue;
    std::fill(state.begin() + occ.pos, state.begin() + occ.pos + len, kTaken);
    accepted.emplace_back(occ.pos, id);
    if (vocab_.attrs[id] & kAttrLstrip) {
      for (size_t i = occ.pos; i > 0 && state[i - 1] == kFree && std::isspace(bytes[i - 1]); --i) {
        state[i - 1] = kDropped;
      }
    }
    if (vocab_.attrs[id] & kAttrRstrip) {
      for (size_t i = occ.pos + len; i < text.size() && state[i] == kFree && std::isspace(bytes[i]);
           ++i) {
        state[i] = kDropped;
      }
    }
  }
  std::sort(accepted.begin(), accepted.end());

  size_t pos = 0;
  auto next_token = accepted.begin();
  while (pos < text.size()) {
    if (state[pos] == kFree) {
      size_t end = pos;
      while (end < text.size() && state[end] == kFree) ++end;
      fragments.push_back({text.substr(pos, end - pos), -1});
      pos = end;
    } else if (state[pos] == kDropped) {
      ++pos;
    } else {
      assert(next_token != accepted.end() && next_token->first == pos);
      fragments.push_back({{}, next_token->second});
      pos += vocab_.texts[next_token->second].size();
      ++next_token;
    }
  }
  return fragments;
}

// ---------------------------------------------------------------- encode / queries

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  bool starts_segment = true;
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      starts_segment = true;
    } else {
      encode_text(f.text, starts_segment, out);
      starts_segment = false;
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  if (add_special && vocab_.add_sep) out.push_back(vocab_.sep);
  return out;
}

void VocabTokenizer::build_piece_cache() {
  pieces_.resize(vocab_.texts.size());
  for (int32_t id = 0; id < vocab_.n_tokens(); ++id) {
    const uint32_t attr = vocab_.attrs[id];
    if (attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      pieces_[id] = vocab_.texts[id];
    } else if (attr & kAttrNormal) {
      pieces_[id] = normal_token_bytes(id);
    } else if (attr & kAttrByte) {
      const int byte = parse_byte_token(vocab_.texts[id]);
      pieces_[id] = byte >= 0 ? std::string(1, static_cast<char>(byte)) : std::string();
    }  // unused / undefined tokens stand for nothing
  }
}

int VocabTokenizer::parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') value |= c - '0';
    else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
    else return -1;
  }
  return value;
}

std::string VocabTokenizer::token_bytes(int32_t id, bool include_special) const {
  if (!vocab_.valid(id)) return {};
  if (!include_special && (vocab_.attrs[id] & (kAttrControl | kAttrUnknown))) return {};
  return pieces_[id];
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
  static const std::string kNone;
  return vocab_.valid(id) ? vocab_.texts[id] : kNone;
}

bool VocabTokenizer::is_special(int32_t id) const {
  return vocab_.valid(id) &&
         (vocab_.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnused | kAttrUnknown));
}

std::optional<int32_t> VocabTokenizer::find_token(std::string_view text) const {
  const int32_t id = vocab_.find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

// ---------------------------------------------------------------- decode / streaming

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special,
                              bool remove_leading_space) const {
  std::string out;
  bool strip = remove_leading_space && add_space_prefix();
  for (int32_t id : ids) {
    std::string piece = token_bytes(id, !skip_special);
    if (strip && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip = false;
    out += piece;
  }
  return out;
}

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_bytes(id, !skip_special_);
  const size_t keep = unicode::incomplete_utf8_tail(pending_);
  std::string_view ready(pending_.data(), pending_.size() - keep);
  std::string out = unicode::is_valid_utf8(ready) ? std::string(ready)
                                                  : unicode::replace_invalid_utf8(ready);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = unicode::replace_invalid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace spillway::engine
