#include "grammar/token_trie.h"

#include <algorithm>
#include <string_view>

#include "grammar/utf8.h"

namespace spillway::grammar {

size_t string_slice_prefix(const std::string& s) {
  size_t boundary = 0;
  int u = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (u == 0 && c < 0x80 && (c < 0x20 || c == '"' || c == '\\')) break;
    u = utf8_step(u, c);
    if (u < 0) break;
    if (u == 0) boundary = i + 1;
  }
  return boundary;
}

ByteTrie ByteTrie::build(std::vector<std::pair<std::string, int32_t>> entries) {
  // Sort views, not the strings themselves (moves of 150k strings dominated the build).
  std::vector<std::pair<std::string_view, int32_t>> e;
  e.reserve(entries.size());
  for (const auto& [s, id] : entries) e.emplace_back(s, id);
  std::sort(e.begin(), e.end());
  ByteTrie t;
  t.nodes_.reserve(e.size() * 2 + 1);
  t.token_ids_.reserve(e.size());
  t.nodes_.push_back(TrieNode{0, 0, 0, 0, 0});
  // Breadth-first over (node, [lo, hi) of entries sharing the node's prefix, depth) so
  // every node's children are contiguous.
  struct Item { uint32_t node; uint32_t lo, hi, depth; };
  std::vector<Item> queue;
  queue.reserve(e.size() * 2 + 1);
  queue.push_back({0, 0, static_cast<uint32_t>(e.size()), 0});
  for (size_t q = 0; q < queue.size(); ++q) {
    const Item it = queue[q];
    uint32_t i = it.lo;
    t.nodes_[it.node].token_begin = static_cast<uint32_t>(t.token_ids_.size());
    while (i < it.hi && e[i].first.size() == it.depth) t.token_ids_.push_back(e[i++].second);
    t.nodes_[it.node].token_end = static_cast<uint32_t>(t.token_ids_.size());
    t.nodes_[it.node].first_child = static_cast<uint32_t>(t.nodes_.size());
    uint32_t n = 0;
    while (i < it.hi) {
      const unsigned char b = static_cast<unsigned char>(e[i].first[it.depth]);
      uint32_t j = i;
      while (j < it.hi && static_cast<unsigned char>(e[j].first[it.depth]) == b) ++j;
      const uint32_t child = static_cast<uint32_t>(t.nodes_.size());
      t.nodes_.push_back(TrieNode{0, 0, 0, 0, b});
      queue.push_back({child, i, j, it.depth + 1});
      ++n;
      i = j;
    }
    t.nodes_[it.node].n_children = n;
  }
  return t;
}

const ClassSlice* TokenTrie::class_slice(const ByteSet& cls) const {
  const std::string key = cls.to_string();
  std::lock_guard<std::mutex> lock(class_mu_);
  auto it = class_slices_.find(key);
  if (it != class_slices_.end()) return it->second.get();
  if (class_slices_.size() >= kMaxClassSlices) return nullptr;
  auto slice = std::make_unique<ClassSlice>();
  const size_t n = vocab_.tokens.size();
  slice->mask.assign((n + 63) / 64, 0);
  slice->upto.assign(kClassSliceBytes, std::vector<uint64_t>((n + 63) / 64, 0));
  std::vector<char> outside(n, 0);
  for (size_t id = 0; id < n; ++id) {
    const std::string& s = vocab_.tokens[id];
    if (s.empty() || is_eos(static_cast<int32_t>(id))) continue;
    bool in = s.size() <= kClassSliceBytes;
    for (size_t i = 0; in && i < s.size(); ++i) in = cls.test(static_cast<unsigned char>(s[i]));
    if (in) {
      slice->mask[id / 64] |= uint64_t{1} << (id % 64);
      for (size_t r = s.size(); r < kClassSliceBytes; ++r) slice->upto[r][id / 64] |= uint64_t{1} << (id % 64);
      ++slice->count;
    } else {
      outside[id] = 1;
    }
  }
  slice->outside = ByteTrie::filtered(full_, outside);
  const ClassSlice* out = slice.get();
  class_slices_.emplace(key, std::move(slice));
  return out;
}

ByteTrie ByteTrie::filtered(const ByteTrie& from, const std::vector<char>& keep) {
  const size_t n = from.nodes_.size();
  // Children come after their parent (breadth-first layout): one backward pass marks the
  // nodes whose subtree holds a kept token.
  std::vector<char> live(n, 0);
  for (size_t i = n; i-- > 0;) {
    const TrieNode& nd = from.nodes_[i];
    char l = 0;
    for (uint32_t k = nd.token_begin; k < nd.token_end && !l; ++k) l = keep[static_cast<size_t>(from.token_ids_[k])];
    for (uint32_t c = nd.first_child; c < nd.first_child + nd.n_children && !l; ++c) l = live[c];
    live[i] = l;
  }
  ByteTrie t;
  t.nodes_.push_back(TrieNode{0, 0, 0, 0, 0});
  std::vector<uint32_t> src{0};  // new node -> old node, breadth-first
  for (size_t q = 0; q < src.size(); ++q) {
    const TrieNode& old = from.nodes_[src[q]];
    t.nodes_[q].token_begin = static_cast<uint32_t>(t.token_ids_.size());
    for (uint32_t k = old.token_begin; k < old.token_end; ++k)
      if (keep[static_cast<size_t>(from.token_ids_[k])]) t.token_ids_.push_back(from.token_ids_[k]);
    t.nodes_[q].token_end = static_cast<uint32_t>(t.token_ids_.size());
    t.nodes_[q].first_child = static_cast<uint32_t>(t.nodes_.size());
    uint32_t kids = 0;
    for (uint32_t c = old.first_child; c < old.first_child + old.n_children; ++c) {
      if (!live[c]) continue;
      t.nodes_.push_back(TrieNode{0, 0, 0, 0, from.nodes_[c].byte});
      src.push_back(c);
      ++kids;
    }
    t.nodes_[q].n_children = kids;
  }
  return t;
}

bool TokenTrie::is_eos(int32_t id) const {
  return std::find(vocab_.eos_ids.begin(), vocab_.eos_ids.end(), id) != vocab_.eos_ids.end();
}

std::shared_ptr<const TokenTrie> TokenTrie::build(Vocabulary vocab) {
  auto t = std::make_shared<TokenTrie>();
  t->vocab_ = std::move(vocab);
  const size_t n = t->vocab_.tokens.size();
  t->slice_mask_.assign((n + 63) / 64, 0);
  t->short_slice_mask_.assign((n + 63) / 64, 0);
  t->slice_upto_.assign(kShortSliceChars, std::vector<uint64_t>((n + 63) / 64, 0));
  std::vector<std::pair<std::string, int32_t>> all, suffixes, outside, outside_short;
  all.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& s = t->vocab_.tokens[id];
    if (s.empty() || t->is_eos(static_cast<int32_t>(id))) continue;
    all.emplace_back(s, static_cast<int32_t>(id));
    size_t p = string_slice_prefix(s);
    if (p == s.size()) {
      t->slice_mask_[id / 64] |= uint64_t{1} << (id % 64);
      ++t->slice_count_;
      size_t chars = 0;
      for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
      for (size_t c = chars; c < kShortSliceChars; ++c) t->slice_upto_[c][id / 64] |= uint64_t{1} << (id % 64);
      if (chars <= kShortSliceChars) t->short_slice_mask_[id / 64] |= uint64_t{1} << (id % 64);
      else outside_short.emplace_back(s, static_cast<int32_t>(id));
    } else {
      suffixes.emplace_back(s.substr(p), static_cast<int32_t>(id));
      outside.emplace_back(s, static_cast<int32_t>(id));
      outside_short.emplace_back(s, static_cast<int32_t>(id));
    }
  }
  t->full_ = ByteTrie::build(std::move(all));
  t->suffixes_ = ByteTrie::build(std::move(suffixes));
  t->outside_slice_ = ByteTrie::build(std::move(outside));
  t->outside_short_slice_ = ByteTrie::build(std::move(outside_short));
  return t;
}

}  // namespace spillway::grammar
