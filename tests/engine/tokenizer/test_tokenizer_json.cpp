// import_tokenizer_json: a vocab GGUF's tokenizer written out in Hugging Face's
// tokenizer.json / tokenizer_config.json format (as transformers' converters write them:
// byte-level BPE with ByteLevel / Split / Digits / Punctuation pre-tokenizers, SentencePiece
// BPE with byte_fallback, merges ordered by piece score) must import into a tokenizer that
// gives the GGUF tokenizer's ids, and llama.cpp's, on every test input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/vocab.h"
#include "tokenizer_test_util.h"

namespace spillway::engine {
namespace {

using nlohmann::json;
using test::ids_to_string;
using test::quoted;
using test::testdata;

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("spillway_tokjson_" + std::to_string(getpid()) + "_" + name);
  fs::create_directories(dir);
  return dir;
}

void write_json(const fs::path& path, const json& j) {
  std::ofstream out(path, std::ios::binary);
  out << j.dump();
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
          {"use_regex", use_regex}};
}
json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"},
          {"invert", false}};
}
json digits(bool individual) { return {{"type", "Digits"}, {"individual_digits", individual}}; }
json sequence(std::vector<json> steps) {
  return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// The pre_tokenizer the models' tokenizer.json files have (as published on the Hub).
json hf_pre_tokenizer(const std::string& pre) {
  if (pre == "gpt-2" || pre == "mpt") return byte_level(true);
  if (pre == "starcoder" || pre == "refact") return sequence({digits(true), byte_level(true)});
  if (pre == "falcon") {
    return sequence({{{"type", "Punctuation"}, {"behavior", "Contiguous"}}, byte_level(true),
                     digits(false), split("[0-9][0-9][0-9]")});
  }
  if (pre == "deepseek-coder") {
    return sequence({split("[\r\n]"), split("\\s?\\p{L}+"), split("\\s?\\p{P}+"),
                     split("[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"), digits(true),
                     byte_level(false)});
  }
  ADD_FAILURE() << "no tokenizer.json pre_tokenizer known for " << pre;
  return nullptr;
}

const MetaArray& array(const Metadata& meta, const char* key) {
  auto a = meta.get_array(key);
  EXPECT_TRUE(a.ok() && *a) << key;
  static const MetaArray kEmpty;
  return a.ok() && *a ? **a : kEmpty;
}

std::optional<int64_t> meta_int(const Metadata& meta, const char* key) {
  auto v = meta.get_int(key);
  return v.ok() ? *v : std::nullopt;
}

// Writes dir/tokenizer.json + dir/tokenizer_config.json for a vocab GGUF's metadata.
// SentencePiece vocabularies get transformers' older normalizer form (Prepend + Replace) or,
// with metaspace, the newer Metaspace pre-tokenizer.
void write_hf_tokenizer(const Metadata& meta, const fs::path& dir, bool merges_as_pairs,
                        bool metaspace) {
  const auto& tokens = array(meta, "tokenizer.ggml.tokens").strings;
  const auto& types = array(meta, "tokenizer.ggml.token_type").ints;
  const std::string model = meta.get_string("tokenizer.ggml.model")->value_or("");
  const std::string pre = meta.get_string("tokenizer.ggml.pre")->value_or("default");
  const bool spm = model == "llama";

  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t type = types[id];
    if (type == kTypeControl || type == kTypeUserDefined || type == kTypeUnknown) {
      added.push_back({{"id", id}, {"content", tokens[id]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", type != kTypeUserDefined}});
      if (spm) vocab[tokens[id]] = id;  // SentencePiece vocabularies list them too
    } else {
      vocab[tokens[id]] = id;
    }
  }

  std::vector<std::pair<std::string, std::string>> merges;
  if (spm) {
    // transformers' SentencePieceExtractor: every split of a piece into two pieces, ordered by
    // the merged piece's score (highest first), then by the ids of the two halves.
    const auto& scores = array(meta, "tokenizer.ggml.scores").floats;
    std::map<std::string, int64_t> index;
    for (size_t id = 0; id < tokens.size(); ++id) index[tokens[id]] = static_cast<int64_t>(id);
    struct M {
      std::string l, r;
      double score;
      int64_t lid, rid;
    };
    std::vector<M> all;
    for (size_t id = 0; id < tokens.size(); ++id) {
      if (types[id] != kTypeNormal) continue;
      const std::string& t = tokens[id];
      std::vector<M> local;
      for (size_t cut = 1; cut < t.size(); ++cut) {
        if ((static_cast<uint8_t>(t[cut]) & 0xC0) == 0x80) continue;  // inside a character
        auto l = index.find(t.substr(0, cut)), r = index.find(t.substr(cut));
        if (l != index.end() && r != index.end()) {
          local.push_back({l->first, r->first, scores[id], l->second, r->second});
        }
      }
      std::sort(local.begin(), local.end(), [](const M& a, const M& b) {
        return a.lid != b.lid ? a.lid < b.lid : a.rid < b.rid;
      });
      all.insert(all.end(), local.begin(), local.end());
    }
    std::stable_sort(all.begin(), all.end(), [](const M& a, const M& b) { return a.score > b.score; });
    for (const M& m : all) merges.emplace_back(m.l, m.r);
  } else {
    for (const std::string& m : array(meta, "tokenizer.ggml.merges").strings) {
      const size_t space = m.find(' ', 1);
      merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
  }
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    if (merges_as_pairs) merge_list.push_back(json::array({l, r}));
    else merge_list.push_back(l + " " + r);
  }

  json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
               {"added_tokens", added}};
  if (spm && metaspace) {
    root["normalizer"] = nullptr;
    root["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"},
                             {"prepend_scheme", "first"}, {"split", false}};
  } else if (spm) {
    root["normalizer"] = {{"type", "Sequence"},
                          {"normalizers",
                           {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                            {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                             {"content", "\u2581"}}}}};
    root["pre_tokenizer"] = nullptr;
  } else {
    root["normalizer"] = nullptr;
    root["pre_tokenizer"] = hf_pre_tokenizer(pre);
  }
  root["post_processor"] = nullptr;
  root["decoder"] = nullptr;
  const auto unk = meta_int(meta, "tokenizer.ggml.unknown_token_id");
  root["model"] = {{"type", "BPE"}, {"dropout", nullptr},
                   {"unk_token", spm && unk ? json(tokens[*unk]) : json(nullptr)},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                   {"fuse_unk", spm}, {"byte_fallback", spm}, {"vocab", vocab},
                   {"merges", merge_list}};
  write_json(dir / "tokenizer.json", root);

  json config = {{"chat_template", "{{ messages }}"}};
  if (auto bos = meta_int(meta, "tokenizer.ggml.bos_token_id")) config["bos_token"] = tokens[*bos];
  if (auto eos = meta_int(meta, "tokenizer.ggml.eos_token_id")) {
    config["eos_token"] = {{"__type", "AddedToken"}, {"content", tokens[*eos]}};
  }
  if (auto add = meta.get_bool("tokenizer.ggml.add_bos_token"); add.ok() && *add) {
    config["add_bos_token"] = **add;
  }
  write_json(dir / "tokenizer_config.json", config);
}

class ImportMatchesGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(ImportMatchesGguf, SameIdsOnAllInputs) {
  const std::string name = GetParam();
  const std::string path = testdata("vocab/ggml-vocab-" + name + ".gguf");
  auto source = test::open_vocab_source(path);
  ASSERT_TRUE(source);
  auto gguf_tok = Tokenizer::from_metadata(source->metadata(), path);
  ASSERT_TRUE(gguf_tok.ok()) << gguf_tok.error().message;

  const fs::path dir = scratch_dir(name);
  write_hf_tokenizer(source->metadata(), dir, /*merges_as_pairs=*/name == "starcoder",
                     /*metaspace=*/name == "phi-3");
  Metadata imported;
  Status st = import_tokenizer_json((dir / "tokenizer.json").string(), imported);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto json_tok = Tokenizer::from_metadata(imported, (dir / "tokenizer.json").string());
  ASSERT_TRUE(json_tok.ok()) << json_tok.error().message;

  EXPECT_EQ((*json_tok)->n_vocab(), (*gguf_tok)->n_vocab());
  EXPECT_EQ((*json_tok)->bos_id(), (*gguf_tok)->bos_id());
  EXPECT_EQ((*json_tok)->eos_id(), (*gguf_tok)->eos_id());
  EXPECT_EQ((*json_tok)->add_bos(), (*gguf_tok)->add_bos());
  EXPECT_EQ(*imported.get_string("tokenizer.chat_template"), std::optional<std::string>("{{ messages }}"));

  int same = 0;
  const auto cases = test::read_vocab_cases(path);
  for (const auto& c : cases) {
    const auto ids = (*json_tok)->encode(c.input, false, false);
    EXPECT_EQ(ids, c.expected) << name << ": input " << quoted(c.input) << "\n  llama.cpp "
                               << ids_to_string(c.expected) << "\n  imported  "
                               << ids_to_string(ids);
    EXPECT_EQ(ids, (*gguf_tok)->encode(c.input, false, false));
    EXPECT_EQ((*json_tok)->encode(c.input, true, true), (*gguf_tok)->encode(c.input, true, true))
        << name << ": input " << quoted(c.input) << " (add_special, parse_special)";
    same += ids == c.expected;
  }
  std::cout << "[ import ] " << name << ": " << same << "/" << cases.size()
            << " cases give llama.cpp's ids\n";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, ImportMatchesGguf,
                         ::testing::Values("gpt-2", "starcoder", "deepseek-coder", "falcon",
                                           "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// --- errors name the file and the key

Status import_text(const std::string& name, const std::string& text) {
  const fs::path dir = scratch_dir(name);
  {
    std::ofstream out(dir / "tokenizer.json", std::ios::binary);
    out << text;
  }
  Metadata meta;
  Status st = import_tokenizer_json((dir / "tokenizer.json").string(), meta);
  fs::remove_all(dir);
  return st;
}

TEST(ImportTokenizerJson, ErrorsNameFileAndKey) {
  Metadata meta;
  Status missing = import_tokenizer_json("/nonexistent/dir/tokenizer.json", meta);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/dir/tokenizer.json"), std::string::npos);

  Status broken = import_text("broken", "{ not json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("tokenizer.json"), std::string::npos);

  Status unigram = import_text("unigram", R"({"model": {"type": "Unigram", "vocab": []}})");
  ASSERT_FALSE(unigram.ok());
  EXPECT_NE(unigram.error().message.find("model.type"), std::string::npos)
      << unigram.error().message;

  Status no_vocab = import_text("novocab", R"({"model": {"type": "BPE", "merges": []}})");
  ASSERT_FALSE(no_vocab.ok());
  EXPECT_NE(no_vocab.error().message.find("model.vocab"), std::string::npos);

  Status bad_id = import_text(
      "badid", R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []},
                   "pre_tokenizer": {"type": "ByteLevel"}})");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message.find("model.vocab['a']"), std::string::npos);

  Status unknown_regex = import_text(
      "regex", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                   "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": "[a-z]+"}, "behavior": "Isolated"},
                     {"type": "ByteLevel", "use_regex": false}]}})");
  ASSERT_FALSE(unknown_regex.ok());
  EXPECT_NE(unknown_regex.error().message.find("pre_tokenizer"), std::string::npos);
  EXPECT_NE(unknown_regex.error().message.find("qwen2"), std::string::npos)
      << "the message lists the known pre-tokenizers: " << unknown_regex.error().message;

  Status bad_merge = import_text(
      "merge", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]},
                   "pre_tokenizer": {"type": "ByteLevel"}})");
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.error().message.find("model.merges[0]"), std::string::npos);
}

// A Llama-3-style tokenizer.json: the Split regex maps to "llama3", the post-processor's
// template adds BOS, added tokens become control / user-defined.
TEST(ImportTokenizerJson, Llama3StyleSplitAndTemplate) {
  json vocab = json::object();
  int id = 0;
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    // GPT-2's byte alphabet, spelled independently of the engine's table.
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = self ? b : 256 + next++;
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab[s] = id++;
  }
  vocab["he"] = id++;
  vocab["ll"] = id++;
  vocab["llo"] = id++;
  vocab["hello"] = id++;
  const int hello = id - 1;
  json root = {
      {"added_tokens",
       {{{"id", id}, {"content", "<|begin_of_text|>"}, {"special", true}},
        {{"id", id + 1}, {"content", "<|eot_id|>"}, {"special", true}},
        {{"id", id + 2}, {"content", "<think>"}, {"special", false}}}},
      {"pre_tokenizer",
       sequence({split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                       "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                 byte_level(false)})},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", "ll o", "he llo"}}}}};
  const fs::path dir = scratch_dir("llama3");
  write_json(dir / "tokenizer.json", root);
  write_json(dir / "tokenizer_config.json", {{"eos_token", "<|eot_id|>"}});
  Metadata meta;
  Status st = import_tokenizer_json((dir / "tokenizer.json").string(), meta);
  fs::remove_all(dir);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(*meta.get_string("tokenizer.ggml.pre"), std::optional<std::string>("llama3"));
  auto tok = Tokenizer::from_metadata(meta, "llama3-style");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const int bos = id, eot = id + 1, think = id + 2;
  EXPECT_EQ((*tok)->bos_id(), bos);
  EXPECT_EQ((*tok)->eos_id(), eot);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_TRUE((*tok)->is_end_of_generation(eot));
  EXPECT_EQ((*tok)->encode("hello", true, false), (std::vector<int32_t>{bos, hello}));
  // <think> is user-defined: split out even without parse_special; <|eot_id|> only with it.
  EXPECT_EQ((*tok)->encode("<think>hello", false, false), (std::vector<int32_t>{think, hello}));
  EXPECT_EQ((*tok)->encode("hello<|eot_id|>", false, true), (std::vector<int32_t>{hello, eot}));
  EXPECT_NE((*tok)->encode("hello<|eot_id|>", false, false), (std::vector<int32_t>{hello, eot}));
}

}  // namespace
}  // namespace spillway::engine
