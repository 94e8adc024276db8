// Grammar engine benchmark: single thread, a 151,936-token vocabulary.
//
//   bench_grammar VOCAB_DIR SCHEMA_DIR [--walks N]
//
// VOCAB_DIR holds llama.cpp's vocab-only GGUFs (../shared/testdata/vocab). The Qwen2 vocab
// (ggml-vocab-qwen2.gguf) is not in the shared test data, so the vocabulary is the union of
// the real byte-level BPE vocabularies there (deepseek-llm, gpt-2, falcon, starcoder,
// deepseek-coder, mpt, refact, then the SentencePiece llama and phi-3 vocabularies), decoded
// to bytes, deduplicated and cut at 151,933 tokens, plus three
// special tokens (<|endoftext|>, <|im_start|>, <|im_end|>; the first and last end generation).
//
// Reports: trie build time; per-schema compile time (median of 11) and its p50 over the
// corpus; mask time p50/p90/p99/max over (a) replaying each corpus instance tokenized
// greedily (longest match), and (b) uniform random walks among allowed tokens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/fsm.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace fs = std::filesystem;
using namespace spillway::grammar;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Minimal GGUF metadata reader: returns tokenizer.ggml.tokens and token_type.
bool read_gguf_vocab(const fs::path& path, std::vector<std::string>& tokens, std::vector<int32_t>& types) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  auto rd = [&](void* p, size_t n) { in.read(static_cast<char*>(p), static_cast<std::streamsize>(n)); return bool(in); };
  auto rd_str = [&]() { uint64_t n = 0; rd(&n, 8); std::string s(n, '\0'); rd(s.data(), n); return s; };
  char magic[4];
  uint32_t version;
  uint64_t n_tensors, n_kv;
  if (!rd(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0) return false;
  rd(&version, 4); rd(&n_tensors, 8); rd(&n_kv, 8);
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  std::function<void(uint32_t, std::string*, int32_t*)> skip_value = [&](uint32_t type, std::string* s, int32_t* i) {
    if (type == 8) { std::string v = rd_str(); if (s) *s = std::move(v); return; }
    if (type == 9) return;  // handled by caller
    uint64_t buf = 0;
    rd(&buf, sizes[type]);
    if (i) *i = static_cast<int32_t>(buf);
  };
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = rd_str();
    uint32_t type = 0;
    rd(&type, 4);
    if (type == 9) {
      uint32_t et = 0;
      uint64_t n = 0;
      rd(&et, 4); rd(&n, 8);
      for (uint64_t j = 0; j < n; ++j) {
        std::string s;
        int32_t v = 0;
        skip_value(et, &s, &v);
        if (key == "tokenizer.ggml.tokens") tokens.push_back(std::move(s));
        if (key == "tokenizer.ggml.token_type") types.push_back(v);
      }
    } else {
      skip_value(type, nullptr, nullptr);
    }
    if (!in) return false;
  }
  return true;
}

// GPT-2 byte-level BPE: token text (unicode stand-ins) -> raw bytes.
std::string gpt2_decode(const std::string& s) {
  static std::map<uint32_t, uint8_t> inv = [] {
    std::map<uint32_t, uint8_t> m;
    std::vector<int> bs;
    for (int b = 33; b < 127; ++b) bs.push_back(b);
    for (int b = 161; b < 173; ++b) bs.push_back(b);
    for (int b = 174; b < 256; ++b) bs.push_back(b);
    std::vector<int> cs = bs;
    int n = 0;
    for (int b = 0; b < 256; ++b)
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) { bs.push_back(b); cs.push_back(256 + n++); }
    for (size_t i = 0; i < bs.size(); ++i) m[static_cast<uint32_t>(cs[i])] = static_cast<uint8_t>(bs[i]);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    auto it = inv.find(cp);
    if (it != inv.end()) out += static_cast<char>(it->second);
    else out += s.substr(i, len);
    i += len;
  }
  return out;
}

Vocabulary build_vocab(const fs::path& dir) {
  const size_t kTarget = 151936;
  Vocabulary v;
  std::set<std::string> seen;
  for (const char* name : {"deepseek-llm", "gpt-2", "falcon", "starcoder", "deepseek-coder", "mpt", "refact",
                           "llama-spm", "phi-3"}) {
    const bool spm = std::string(name) == "llama-spm" || std::string(name) == "phi-3";
    std::vector<std::string> toks;
    std::vector<int32_t> types;
    if (!read_gguf_vocab(dir / (std::string("ggml-vocab-") + name + ".gguf"), toks, types)) {
      std::fprintf(stderr, "cannot read %s\n", name);
      continue;
    }
    for (size_t i = 0; i < toks.size() && v.tokens.size() < kTarget - 3; ++i) {
      if (i < types.size() && types[i] != 1) continue;
      std::string b;
      if (spm) {  // SentencePiece: U+2581 is a space; byte tokens <0xXX> are skipped
        if (toks[i].rfind("<0x", 0) == 0) continue;
        for (size_t k = 0; k < toks[i].size(); ++k) {
          if (toks[i].compare(k, 3, "\xE2\x96\x81") == 0) { b += ' '; k += 2; } else b += toks[i][k];
        }
      } else {
        b = gpt2_decode(toks[i]);
      }
      if (b.empty() || !seen.insert(b).second) continue;
      v.tokens.push_back(std::move(b));
    }
  }
  v.tokens.push_back("");  // <|endoftext|>
  v.tokens.push_back("");  // <|im_start|>
  v.tokens.push_back("");  // <|im_end|>
  v.eos_ids = {static_cast<int32_t>(v.tokens.size() - 3), static_cast<int32_t>(v.tokens.size() - 1)};
  return v;
}

std::vector<int32_t> tokenize_greedy(const TokenTrie& trie, const std::string& text) {
  std::vector<int32_t> out;
  const ByteTrie& t = trie.full();
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t node = 0;
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const TrieNode& n = t.node(node);
      uint32_t next = UINT32_MAX;
      for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c)
        if (t.node(c).byte == static_cast<uint8_t>(text[i])) { next = c; break; }
      if (next == UINT32_MAX) break;
      node = next;
      if (t.node(node).token_end > t.node(node).token_begin) { best = t.tokens()[t.node(node).token_begin]; best_len = i + 1 - pos; }
    }
    if (best < 0) return {};
    out.push_back(best);
    pos += best_len;
  }
  return out;
}

struct Percentiles { double p50, p90, p99, max; };
Percentiles percentiles(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0, 0};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  return {at(0.5), at(0.9), at(0.99), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) { std::fprintf(stderr, "usage: %s VOCAB_DIR SCHEMA_DIR [--walks N]\n", argv[0]); return 2; }
  int walks = 4;
  for (int i = 3; i + 1 < argc; ++i) if (std::string(argv[i]) == "--walks") walks = std::atoi(argv[i + 1]);
  Vocabulary vocab = build_vocab(argv[1]);
  std::printf("vocabulary: %zu tokens\n", vocab.tokens.size());
  std::vector<double> trie_ms;
  std::shared_ptr<const TokenTrie> trie;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    trie = TokenTrie::build(vocab);
    trie_ms.push_back(us_since(t0) / 1000);
  }
  std::sort(trie_ms.begin(), trie_ms.end());
  std::printf("trie build: %.1f ms (median of 3); %zu nodes full, %zu suffix nodes, %zu string-slice tokens\n",
              trie_ms[1], trie->full().node_count(), trie->string_suffixes().node_count(), trie->string_slice_count());

  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(argv[2])) if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<double> compile_us, replay_us, walk_us;
  std::vector<double> steps_all;
  std::vector<double> setup_ms;  // first Matcher per schema (byte-class slices built on first use)  // trie steps per mask: the walk's work, free of timing noise
  std::vector<uint64_t> mask(trie->mask_words());
  std::mt19937_64 rng(1234);
  size_t fast = 0, masks = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    auto doc = nlohmann::ordered_json::parse(in);
    std::vector<double> times;
    std::shared_ptr<const CompiledGrammar> g;
    double ir_us = 0;
    for (int r = 0; r < 11; ++r) {
      auto t0 = Clock::now();
      auto ir = json_schema_grammar(doc["schema"]);
      if (!ir) { std::printf("%s: %s\n", f.filename().c_str(), ir.error().message.c_str()); break; }
      ir_us = us_since(t0);
      auto c = CompiledGrammar::compile(*ir);
      times.push_back(us_since(t0));
      if (!c) { std::printf("%s: %s\n", f.filename().c_str(), c.error().message.c_str()); break; }
      g = *c;
    }
    if (!g) continue;
    std::sort(times.begin(), times.end());
    compile_us.push_back(times[times.size() / 2]);
    // (a) replay the instance.
    std::vector<double> mine;
    auto tokens = tokenize_greedy(*trie, doc["instance"].dump());
    const auto setup0 = Clock::now();
    Matcher m(g, trie);  // the first matcher of a grammar builds its byte-class slices (once per class)
    setup_ms.push_back(us_since(setup0) / 1000);
    bool ok = !tokens.empty();
    for (int32_t tok : tokens) {
      MaskStats st;
      auto t0 = Clock::now();
      auto s = m.compute_mask(mask.data(), &st);
      double us = us_since(t0);
      mine.push_back(us);
      replay_us.push_back(us);
      steps_all.push_back(static_cast<double>(st.steps));
      if (getenv("BENCH_GRAMMAR_SLOW") && us > 1000) {
        std::string prefix;
        for (size_t k = 0; k < mine.size() - 1; ++k) prefix += trie->token_bytes(tokens[k]);
        std::printf("  slow %.0f us, %llu steps, slice %d, after ...%s\n", us, static_cast<unsigned long long>(st.steps),
                    st.slice_path, prefix.substr(prefix.size() > 40 ? prefix.size() - 40 : 0).c_str());
      }
      ++masks;
      fast += st.slice_path;
      if (!s.ok() || !(mask[static_cast<size_t>(tok) >> 6] >> (tok & 63) & 1) || !m.accept_token(tok).ok()) { ok = false; break; }
    }
    if (ok) {
      auto s = m.compute_mask(mask.data());
      ok = s.ok() && (mask[static_cast<size_t>(trie->eos_ids()[0]) >> 6] >> (trie->eos_ids()[0] & 63) & 1);
    }
    auto p = percentiles(mine);
    std::printf("%-28s ir %6.0f us, %6zu states  ", f.stem().c_str(), ir_us, g->state_count());
    std::printf("%-28s compile %7.0f us  replay %3zu tokens %s  mask p50 %6.1f us  max %7.1f us\n",
                f.stem().c_str(), compile_us.back(), tokens.size(), ok ? "ok " : "BAD", p.p50, p.max);
    // (b) random walks.
    std::vector<int32_t> allowed;
    for (int w = 0; w < walks; ++w) {
      Matcher rw(g, trie);
      std::string text;
      for (int step = 0; step < 200; ++step) {
        MaskStats st;
        auto t0 = Clock::now();
        auto s = rw.compute_mask(mask.data(), &st);
        const double wus = us_since(t0);
        walk_us.push_back(wus);
        steps_all.push_back(static_cast<double>(st.steps));
        if (getenv("BENCH_GRAMMAR_SLOW") && wus > 1000)
          std::printf("  slow walk mask %.0f us, %llu steps, slice %d, %s after ...%s\n", wus, static_cast<unsigned long long>(st.steps),
                      st.slice_path, f.stem().c_str(), text.substr(text.size() > 40 ? text.size() - 40 : 0).c_str());
        ++masks;
        fast += st.slice_path;
        if (!s.ok()) { std::printf("  walk mask error: %s\n", s.error().message.c_str()); break; }
        allowed.clear();
        for (size_t wd = 0; wd < mask.size(); ++wd)
          for (uint64_t bits = mask[wd]; bits; bits &= bits - 1)
            allowed.push_back(static_cast<int32_t>(wd * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
        if (allowed.empty()) break;
        int32_t tok = allowed[rng() % allowed.size()];
        if (trie->is_eos(tok)) break;
        if (!rw.accept_token(tok).ok()) { std::printf("  walk: mask allowed a token accept refused\n"); break; }
        text += trie->token_bytes(tok);
      }
    }
  }
  auto c = percentiles(compile_us), r = percentiles(replay_us), w = percentiles(walk_us);
  std::vector<double> all = replay_us;
  all.insert(all.end(), walk_us.begin(), walk_us.end());
  auto a = percentiles(all);
  std::printf("\ncompile (schema -> ready grammar), %zu schemas: p50 %.0f us, max %.0f us\n", compile_us.size(), c.p50, c.max);
  std::printf("mask, instance replay (%zu masks): p50 %.1f us  p90 %.1f  p99 %.1f  max %.1f\n", replay_us.size(), r.p50, r.p90, r.p99, r.max);
  std::printf("mask, random walks    (%zu masks): p50 %.1f us  p90 %.1f  p99 %.1f  max %.1f\n", walk_us.size(), w.p50, w.p90, w.p99, w.max);
  std::printf("mask, all             (%zu masks): p50 %.1f us  p90 %.1f  p99 %.1f  max %.1f\n", all.size(), a.p50, a.p90, a.p99, a.max);
  double setup_total = 0;
  for (double v : setup_ms) setup_total += v;
  std::printf("first matcher per schema (builds new byte-class slices): total %.1f ms, max %.1f ms\n", setup_total,
              percentiles(setup_ms).max);
  auto sp = percentiles(steps_all);
  std::printf("trie steps per mask, all:             p50 %.0f  p90 %.0f  p99 %.0f  max %.0f\n", sp.p50, sp.p90, sp.p99, sp.max);
  std::printf("slice paths (string loop / live states): %.1f%% of masks\n", 100.0 * static_cast<double>(fast) / static_cast<double>(std::max<size_t>(masks, 1)));
  return 0;
}
