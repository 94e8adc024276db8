// Byte-level BPE ("gpt2" vocabularies), as llama.cpp's llm_tokenizer_bpe: the pre-tokenizer
// splits the text into words, each word's bytes are spelled in GPT-2's byte alphabet, and
// within a word the adjacent pair with the lowest merge rank is merged until no pair has one
// (ties: leftmost first). One priority queue and a linked list of symbols per word:
// O(n log n) in the word length.
#include <array>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode_text.h"

namespace spillway::engine {

namespace {

struct Merge {
  int32_t rank;
  int32_t result;
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab vocab, std::unique_ptr<PreTokenizer> pretokenizer,
               std::unordered_map<uint64_t, Merge> merges)
      : VocabTokenizer(std::move(vocab)),
        pretokenizer_(std::move(pretokenizer)),
        merges_(std::move(merges)) {
    for (int b = 0; b < 256; ++b) {
      byte_symbol_[b] = this->vocab().find(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
    }
    build_piece_cache();
  }

 protected:
  void encode_text(std::string_view raw, bool starts_segment,
                   std::vector<int32_t>& out) const override;

  std::string normal_token_bytes(int32_t id) const override {
    const std::string& text = vocab().texts[id];
    std::string out;
    uint32_t cp = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = unicode::decode_utf8(text, pos, &cp);
      const int byte = len ? unicode::unicode_to_byte(cp) : -1;
      if (byte >= 0) {
        out += static_cast<char>(byte);
        pos += len;
      } else {  // not in the byte alphabet: keep the text as it is
        const size_t n = len ? len : 1;
        out.append(text, pos, n);
        pos += n;
      }
    }
    return out;
  }

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::unique_ptr<PreTokenizer> pretokenizer_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  std::array<int32_t, 256> byte_symbol_{};      // token of each byte's alphabet letter, or -1
};

struct Symbol {
  int32_t prev;
  int32_t next;
  int32_t token;  // -1: a byte whose letter is not in the vocabulary (never merges)
  uint8_t byte;   // the first byte (for the fallback of token -1)
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_token;
  int32_t right_token;
};

struct CandidateOrder {
  // priority_queue pops the "largest": lowest rank, then leftmost.
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const Vocab& v = vocab();
  if (pretokenizer_->traits().ignore_merges) {
    std::string spelled;
    for (char c : word) spelled += unicode::byte_to_unicode(static_cast<uint8_t>(c));
    if (const int32_t id = v.find(spelled); id >= 0) {
      out.push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<uint8_t>(word[i]);
    const auto idx = static_cast<int32_t>(i);
    symbols[i] = {idx - 1, i + 1 == word.size() ? -1 : idx + 1, byte_symbol_[b], b, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t lt = symbols[left].token, rt = symbols[right].token;
    if (lt < 0 || rt < 0) return;
    auto it = merges_.find(pair_key(lt, rt));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, lt, rt});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (!left.alive || !right.alive || left.next != c.right || left.token != c.left_token ||
        right.token != c.right_token) {
      continue;  // stale
    }
    left.token = merges_.at(pair_key(c.left_token, c.right_token)).result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(symbols.size()); i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.token >= 0) {
      out.push_back(s.token);
      continue;
    }
    // llama.cpp looks up each byte of the letter's UTF-8 as a one-byte token.
    for (char c : unicode::byte_to_unicode(s.byte)) {
      if (const int32_t id = v.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

void BpeTokenizer::encode_text(std::string_view raw, bool /*starts_segment*/,
                               std::vector<int32_t>& out) const {
  std::string sanitized;
  std::string_view text = raw;
  if (!unicode::is_valid_utf8(raw)) {
    sanitized = unicode::replace_invalid_utf8(raw);
    text = sanitized;
  }
  std::vector<std::pair<size_t, size_t>> words;
  pretokenizer_->split(text, words);
  for (const auto& [offset, length] : words) encode_word(text.substr(offset, length), out);
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab,
                                                      std::unique_ptr<PreTokenizer> pretokenizer,
                                                      const Metadata& meta,
                                                      std::string_view source_name) {
  constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
  auto array = meta.get_array(kMergesKey);
  if (!array.ok()) return array.error();
  const MetaArray* merges = *array;
  if (!merges) return Error{fmt::format("{}: {} is missing", source_name, kMergesKey)};
  if (merges->kind != MetaArray::Kind::String) {
    return Error{fmt::format("{}: {} is not an array of strings", source_name, kMergesKey)};
  }
  std::unordered_map<uint64_t, Merge> table;
  table.reserve(merges->strings.size());
  for (size_t rank = 0; rank < merges->strings.size(); ++rank) {
    const std::string& m = merges->strings[rank];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos) {
      return Error{fmt::format("{}: {}[{}] = '{}' is not two tokens separated by a space",
                               source_name, kMergesKey, rank, m)};
    }
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t l = vocab.find(left), r = vocab.find(right);
    if (l < 0 || r < 0) {
      return Error{fmt::format("{}: {}[{}] = '{}' refers to '{}', which is not in "
                               "tokenizer.ggml.tokens", source_name, kMergesKey, rank, m,
                               l < 0 ? left : right)};
    }
    const int32_t result = vocab.find(std::string(left) + std::string(right));
    if (result < 0) {
      return Error{fmt::format("{}: {}[{}] = '{}' makes '{}{}', which is not in "
                               "tokenizer.ggml.tokens", source_name, kMergesKey, rank, m, left,
                               right)};
    }
    table.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});  // first rank wins
  }
  return std::unique_ptr<Tokenizer>(
      std::make_unique<BpeTokenizer>(std::move(vocab), std::move(pretokenizer), std::move(table)));
}

}  // namespace spillway::engine
