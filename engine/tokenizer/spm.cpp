// SentencePiece BPE ("llama" vocabularies), as llama.cpp's llm_tokenizer_spm: spaces become
// "▁", the text is split into UTF-8 characters, and the adjacent pair whose concatenation is
// the token with the highest score is merged until no pair is a token (ties: leftmost first).
// Symbols that are not tokens fall back to <0xXX> byte tokens.
//
// Long texts are merged in chunks (issue #20: one 15 MB prompt peaked at ~700 MB RSS in the
// per-character symbols and the bigram queue). A chunk ends just before a "▁" that follows a
// character other than "▁", and only when no vocabulary token has such a pair inside it (the
// vocabularies seen have "▁" only as a prefix or in runs of "▁"): then no token can span the
// cut, merges inside one chunk never depend on another, and the result is exactly the
// unchunked one (spm_chunk_bytes() = SIZE_MAX gives the unchunked path, for tests).
#include <array>
#include <atomic>
#include <queue>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode_text.h"

namespace spillway::engine {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : VocabTokenizer(std::move(vocab)) {
    for (int b = 0; b < 256; ++b) {
      int32_t id = this->vocab().find(fmt::format("<0x{:02X}>", b));
      if (id < 0) id = this->vocab().find(std::string(1, static_cast<char>(b)));
      if (id < 0) id = this->vocab().unk;
      byte_token_[b] = id;
    }
    // Chunking is exact when no token holds "▁" right after another character.
    chunkable_ = true;
    for (const std::string& t : this->vocab().texts) {
      for (size_t at = t.find(kSpaceMarker, 1); at != std::string::npos; at = t.find(kSpaceMarker, at + 1)) {
        if (at < kSpaceMarker.size() || t.compare(at - kSpaceMarker.size(), kSpaceMarker.size(), kSpaceMarker) != 0) {
          chunkable_ = false;
          break;
        }
      }
      if (!chunkable_) break;
    }
    build_piece_cache();
  }

 protected:
  void encode_text(std::string_view raw, bool starts_segment,
                   std::vector<int32_t>& out) const override;

  std::string normal_token_bytes(int32_t id) const override {
    const std::string& text = vocab().texts[id];
    std::string out;
    out.reserve(text.size());
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
  // Merges one chunk of escaped text.
  void encode_escaped(std::string_view text, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_token_{};
  bool chunkable_ = false;
};

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t offset;  // into the escaped text
  size_t size;    // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t size;
};

struct BigramOrder {
  // priority_queue pops the "largest": highest score, then leftmost.
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

void SpmTokenizer::encode_text(std::string_view raw, bool starts_segment,
                               std::vector<int32_t>& out) const {
  const Vocab& v = vocab();
  std::string text;
  text.reserve(raw.size() + raw.size() / 2 + 3);
  if (v.add_space_prefix && starts_segment) text += kSpaceMarker;
  for (char c : raw) {
    if (c == ' ') text += kSpaceMarker;
    else text += c;
  }
  if (text.empty()) return;
  const size_t chunk = chunkable_ ? spm_chunk_bytes().load(std::memory_order_relaxed) : SIZE_MAX;
  const std::string_view all(text);
  size_t begin = 0;
  while (all.size() - begin > chunk) {
    // The first "▁" at or after begin + chunk that follows another character.
    size_t cut = all.find(kSpaceMarker, begin + chunk);
    while (cut != std::string_view::npos && cut >= kSpaceMarker.size() &&
           all.compare(cut - kSpaceMarker.size(), kSpaceMarker.size(), kSpaceMarker) == 0) {
      cut = all.find(kSpaceMarker, cut + kSpaceMarker.size());
    }
    if (cut == std::string_view::npos) break;
    encode_escaped(all.substr(begin, cut - begin), out);
    begin = cut;
  }
  encode_escaped(all.substr(begin), out);
}

void SpmTokenizer::encode_escaped(std::string_view text, std::vector<int32_t>& out) const {
  const Vocab& v = vocab();
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(unicode::utf8_length_from_lead(static_cast<uint8_t>(text[offset])),
                                text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].size + symbols[right].size;
    const int32_t id = v.find(text.substr(symbols[left].offset, size));
    if (id < 0) return;
    queue.push({left, right, v.scores[id], size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: one side was merged since (sizes only grow, so the sum tells).
    if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.size);
    const int32_t id = v.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = byte_token_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace

std::atomic<size_t>& spm_chunk_bytes() {
  static std::atomic<size_t> bytes{64 << 10};
  return bytes;
}

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace spillway::engine
