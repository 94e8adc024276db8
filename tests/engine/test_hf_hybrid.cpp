// Hugging Face folders of hybrid models (qwen3_5_text, qwen3_5, qwen3_5_moe, qwen3_next) against
// GGUF files of the same weights and against folders and logits made by transformers. The test writes each HF folder itself from a GGUF, undoing what
// llama.cpp's converter does (conversion/qwen.py): RMSNorm weights stored zero-centred (GGUF
// w + 1; ssm_norm excepted), A_log = log(-ssm_a), conv1d [C, 1, K], for qwen35 the value
// heads back in HF's grouped order (the converter tiles them: GGUF head j*nk + g is HF head
// g*r + j, in qkv's v rows, z, beta, alpha, dt, A, the conv's v channels and ssm_out's
// columns), for qwen3next attn_qkv + attn_gate fused per key head into in_proj_qkvz and the
// stacked experts split per expert. The engine must then give the GGUF's logits, and for the
// trained qwen35 model also its PyTorch float64 reference (models/eval/qwen35/parity.json).
// Broken folders are errors naming the file and the tensor or key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/format/gguf_writer.h"
#include "engine/format/hf_tensor_names.h"
#include "engine/forward/batch.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/residency/weight_residency.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "engine/tokenizer/tokenizer.h"
#include "hf_test_files.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "tools/demo_model.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("spillway-hfhybrid-" + std::to_string(::getpid()) + "-" + name);
}

// A tensor as rows of elements of `es` bytes (F32 / F16 / BF16 kept as stored, so the HF
// matmuls read the same values as the GGUF's); `type` names its dtype.
struct Blob {
  kernels::DType type = kernels::DType::F32;
  int64_t rows = 0, cols = 0;  // [rows, cols] row-major (cols contiguous)
  std::vector<uint8_t> bytes;
  int64_t es() const { return kernels::block_bytes(type); }
  const uint8_t* row(int64_t r) const { return bytes.data() + r * cols * es(); }
};

const char* st_dtype(kernels::DType t) {
  return t == kernels::DType::F16 ? "F16" : t == kernels::DType::BF16 ? "BF16" : "F32";
}

// Matrices keep F32/F16/BF16; anything else (Q8_0) and every 1-D tensor becomes F32.
Blob blob_of(const TensorInfo& t, bool force_f32 = false) {
  Blob b;
  b.cols = t.shape[0];
  b.rows = t.n_elements() / b.cols;
  const bool keep = !force_f32 && t.shape.size() >= 2 &&
                    (t.type == kernels::DType::F32 || t.type == kernels::DType::F16 || t.type == kernels::DType::BF16);
  if (keep) {
    b.type = t.type;
    const auto* p = static_cast<const uint8_t*>(t.data);
    b.bytes.assign(p, p + t.n_bytes);
    return b;
  }
  std::vector<float> f(t.n_elements());
  for (int64_t r = 0; r < b.rows; ++r) {
    kernels::dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + r * (t.n_bytes / b.rows),
                            f.data() + r * b.cols, b.cols);
  }
  b.bytes.resize(f.size() * 4);
  std::memcpy(b.bytes.data(), f.data(), b.bytes.size());
  return b;
}

std::vector<float> floats(const Blob& b) {
  EXPECT_EQ(b.type, kernels::DType::F32);
  std::vector<float> f(b.bytes.size() / 4);
  std::memcpy(f.data(), b.bytes.data(), b.bytes.size());
  return f;
}
Blob from_floats(const std::vector<float>& f, int64_t rows, int64_t cols) {
  Blob b{kernels::DType::F32, rows, cols, std::vector<uint8_t>(f.size() * 4)};
  std::memcpy(b.bytes.data(), f.data(), b.bytes.size());
  return b;
}

// out row i = in row map(i), for the rows [begin, end) (rows outside are copied as they are).
Blob permute_rows(const Blob& in, int64_t begin, int64_t end, const std::function<int64_t(int64_t)>& map) {
  Blob out = in;
  const int64_t rb = in.cols * in.es();
  for (int64_t i = begin; i < end; ++i) std::memcpy(out.bytes.data() + i * rb, in.row(begin + map(i - begin)), rb);
  return out;
}
// out column j = in column map(j).
Blob permute_cols(const Blob& in, const std::function<int64_t(int64_t)>& map) {
  Blob out = in;
  const int64_t es = in.es();
  for (int64_t r = 0; r < in.rows; ++r) {
    for (int64_t j = 0; j < in.cols; ++j) std::memcpy(out.bytes.data() + (r * in.cols + j) * es, in.row(r) + map(j) * es, es);
  }
  return out;
}

struct HfFolder {
  json config;
  std::vector<testing::SafetensorsEntry> tensors;
  void add(const std::string& name, const Blob& b, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = b.rows == 1 ? std::vector<int64_t>{b.cols} : std::vector<int64_t>{b.rows, b.cols};
    tensors.push_back({name, st_dtype(b.type), shape, b.bytes});
  }
  bool remove(const std::string& name) {
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& e) { return e.name == name; });
    if (it == tensors.end()) return false;
    tensors.erase(it);
    return true;
  }
  testing::SafetensorsEntry* find(const std::string& name) {
    for (auto& e : tensors) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  void write(const fs::path& dir) const {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump(2);
    testing::write_byte_level_tokenizer_json(dir);
    testing::write_safetensors(dir / "model.safetensors", tensors);
  }
};

// GGUF value head of HF (grouped) value head hg, for qwen35's tiled order.
int64_t tiled_head(int64_t hg, int64_t nk, int64_t r) { return (hg % r) * nk + hg / r; }

// The HF folder of a qwen35 / qwen3next GGUF model. prefix: "model." or, for the
// image-text wrapper, "model.language_model.".
HfFolder hf_of(const Model& model, bool vl_wrapper = false, bool f32 = false) {
  const ModelConfig& c = model.config();
  const ModelSource& src = model.source();
  const bool next = c.architecture == "qwen3next";
  const LayerSpec* gdn = nullptr;
  json layer_types = json::array();
  for (const LayerSpec& s : c.layers) {
    if (s.mixer == MixerKind::GatedDeltaNet) gdn = &s;
    layer_types.push_back(s.mixer == MixerKind::GatedDeltaNet ? "linear_attention" : "full_attention");
  }
  EXPECT_NE(gdn, nullptr);
  const int64_t S = gdn->ssm_state, nk = gdn->ssm_key_heads, nv = gdn->ssm_value_heads, r = nv / nk;
  const int64_t K = gdn->ssm_conv_kernel, q_rows = 2 * nk * S;
  // HF head -> GGUF head: identity for qwen3next (grouped in both), tiled for qwen35.
  auto head = [&](int64_t hg) { return next ? hg : tiled_head(hg, nk, r); };

  HfFolder f;
  const std::string base = vl_wrapper ? "model.language_model." : "model.";
  auto get = [&](const std::string& name) {
    const TensorInfo* t = src.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return blob_of(*t, f32 || next);
  };
  auto minus_one = [&](const std::string& name) {
    Blob b = get(name);
    auto v = floats(b);
    for (float& x : v) x -= 1.0f;
    return from_floats(v, b.rows, b.cols);
  };
  f.add("model.embed_tokens.weight", get("token_embd.weight"));
  f.add(base + "norm.weight", minus_one("output_norm.weight"));
  if (src.find_tensor("output.weight")) f.add("lm_head.weight", get("output.weight"));
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const LayerSpec& s = c.layers[i];
    const std::string g = "blk." + std::to_string(i) + ".", h = base + "layers." + std::to_string(i) + ".";
    f.add(h + "input_layernorm.weight", minus_one(g + "attn_norm.weight"));
    f.add(h + "post_attention_layernorm.weight", minus_one(g + "post_attention_norm.weight"));
    if (s.mixer == MixerKind::Attention) {
      for (const char* p : {"q", "k", "v"}) f.add(h + "self_attn." + p + "_proj.weight", get(g + "attn_" + p + ".weight"));
      f.add(h + "self_attn.o_proj.weight", get(g + "attn_output.weight"));
      f.add(h + "self_attn.q_norm.weight", minus_one(g + "attn_q_norm.weight"));
      f.add(h + "self_attn.k_norm.weight", minus_one(g + "attn_k_norm.weight"));
    } else {
      const std::string la = h + "linear_attn.";
      // The v rows / channels of HF head hg come from GGUF head head(hg).
      auto v_map = [&](int64_t i) { return head(i / S) * S + i % S; };
      Blob qkv = permute_rows(get(g + "attn_qkv.weight"), q_rows, q_rows + nv * S, v_map);
      Blob z = permute_rows(get(g + "attn_gate.weight"), 0, nv * S, v_map);
      if (next) {  // per key head: [q_g | k_g | v of its r heads | z of them]
        Blob qkvz{qkv.type, qkv.rows + z.rows, qkv.cols, {}};
        const int64_t rb = qkv.cols * qkv.es();
        auto append = [&](const Blob& b, int64_t row, int64_t n) {
          qkvz.bytes.insert(qkvz.bytes.end(), b.row(row), b.row(row) + n * rb);
        };
        for (int64_t kg = 0; kg < nk; ++kg) {
          append(qkv, kg * S, S);
          append(qkv, nk * S + kg * S, S);
          append(qkv, q_rows + kg * r * S, r * S);
          append(z, kg * r * S, r * S);
        }
        f.add(la + "in_proj_qkvz.weight", qkvz);
        f.add(la + "in_proj_ba.weight", get(g + "ssm_ba.weight"));
      } else {
        f.add(la + "in_proj_qkv.weight", qkv);
        f.add(la + "in_proj_z.weight", z);
        f.add(la + "in_proj_b.weight", permute_rows(get(g + "ssm_beta.weight"), 0, nv, head));
        f.add(la + "in_proj_a.weight", permute_rows(get(g + "ssm_alpha.weight"), 0, nv, head));
      }
      Blob conv = get(g + "ssm_conv1d.weight");  // [C rows, K]
      conv = permute_rows(conv, q_rows, q_rows + nv * S, v_map);
      f.add(la + "conv1d.weight", conv, {conv.rows, 1, K});
      auto per_head = [&](const std::string& name, const std::function<float(float)>& fn) {
        const auto v = floats(get(name));
        std::vector<float> out(nv);
        for (int64_t hg = 0; hg < nv; ++hg) out[hg] = fn(v[head(hg)]);
        return from_floats(out, 1, nv);
      };
      f.add(la + "dt_bias", per_head(g + "ssm_dt.bias", [](float x) { return x; }));
      f.add(la + "A_log", per_head(g + "ssm_a", [](float a) { return std::log(-a); }));
      f.add(la + "norm.weight", get(g + "ssm_norm.weight"));
      f.add(la + "out_proj.weight", permute_cols(get(g + "ssm_out.weight"), v_map));
    }
    if (src.find_tensor(g + "ffn_gate.weight")) {
      for (const char* p : {"gate", "up", "down"}) f.add(h + "mlp." + p + "_proj.weight", get(g + "ffn_" + p + ".weight"));
    } else {
      f.add(h + "mlp.gate.weight", get(g + "ffn_gate_inp.weight"));
      for (const char* p : {"gate", "up", "down"}) {
        const Blob all = get(g + "ffn_" + p + "_exps.weight");  // [E * rows, cols]
        const int64_t n_expert = src.find_tensor(g + "ffn_" + p + "_exps.weight")->shape[2];
        const int64_t rows = all.rows / n_expert;
        for (int64_t e = 0; e < n_expert; ++e) {
          Blob one{all.type, rows, all.cols, std::vector<uint8_t>(all.row(e * rows), all.row((e + 1) * rows))};
          f.add(h + "mlp.experts." + std::to_string(e) + "." + p + "_proj.weight", one);
        }
        f.add(h + "mlp.shared_expert." + p + "_proj.weight", get(g + "ffn_" + p + "_shexp.weight"));
      }
      Blob sg = get(g + "ffn_gate_inp_shexp.weight");
      f.add(h + "mlp.shared_expert_gate.weight", sg, {1, sg.cols});
    }
  }

  json text = {
      {"hidden_size", c.n_embd},
      {"num_hidden_layers", c.n_layers},
      {"intermediate_size", c.n_ff},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.n_ctx_train},
      {"rms_norm_eps", c.rms_eps},
      {"vocab_size", c.n_vocab},
      {"tie_word_embeddings", src.find_tensor("output.weight") == nullptr},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"linear_conv_kernel_dim", K},
      {"linear_key_head_dim", S},
      {"linear_value_head_dim", S},
      {"linear_num_key_heads", nk},
      {"linear_num_value_heads", nv},
  };
  const double partial = double(c.rope_dim) / c.head_dim;
  if (next) {
    text["model_type"] = "qwen3_next";
    text["architectures"] = {"Qwen3NextForCausalLM"};
    text["rope_theta"] = c.rope_freq_base;
    text["partial_rotary_factor"] = partial;
    text["full_attention_interval"] = 4;  // the interval path (qwen35 uses layer_types)
    const auto meta = [&](const char* k) { return *src.metadata().get_int("qwen3next." + std::string(k)).value(); };
    text["num_experts"] = meta("expert_count");
    text["num_experts_per_tok"] = meta("expert_used_count");
    text["moe_intermediate_size"] = meta("expert_feed_forward_length");
    text["shared_expert_intermediate_size"] = meta("expert_shared_feed_forward_length");
    text["norm_topk_prob"] = true;
    text["decoder_sparse_step"] = 1;
    text["mlp_only_layers"] = json::array();
    f.config = text;
  } else {
    text["model_type"] = "qwen3_5_text";
    text["layer_types"] = layer_types;
    text["rope_parameters"] = {{"rope_type", "default"},
                               {"rope_theta", c.rope_freq_base},
                               {"partial_rotary_factor", partial},
                               {"mrope_section", {11, 11, 10}},
                               {"mrope_interleaved", true}};
    if (vl_wrapper) {
      f.config = {{"model_type", "qwen3_5"}, {"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"text_config", text}};
      f.config["tie_word_embeddings"] = text["tie_word_embeddings"];
      f.config["text_config"].erase("tie_word_embeddings");
      f.config["text_config"]["model_type"] = "qwen3_5_text";
    } else {
      text["architectures"] = {"Qwen3_5ForCausalLM"};
      f.config = text;
    }
  }
  // What the engine ignores: MTP and vision tensors.
  f.add("mtp.fc.weight", from_floats(std::vector<float>(4, 1.0f), 2, 2));
  if (vl_wrapper) f.add("model.visual.patch_embed.proj.weight", from_floats(std::vector<float>(4, 1.0f), 2, 2));
  return f;
}

// Every position's logits of `tokens`, one forward (F32 KV cache, one state slot); weights:
// a streaming weight source, or null for the model's own (resident) weights.
std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens,
                              LayerWeightSource* weights = nullptr) {
  const ModelConfig& cfg = model.config();
  kernels::ThreadPool pool(2);
  const auto n = static_cast<int32_t>(tokens.size());
  KvCache kv(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 16, (n + 15) / 16, kernels::DType::F32);
  ForwardPass forward(model, kv, pool, n, n, weights);
  RecurrentState state(cfg, 1);
  forward.set_recurrent_state(&state);
  std::vector<int32_t> blocks(kv.n_blocks());
  for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;
  ForwardBatch batch;
  batch.add_sequence(tokens.data(), n, 0, blocks);
  batch.sequences[0].state_slot = 0;
  for (int32_t i = 0; i < n; ++i) batch.logit_rows.push_back(i);
  auto result = forward.execute(batch);
  EXPECT_TRUE(result.ok()) << result.error().message;
  if (!result.ok()) return {};
  return {result->begin(), result->end()};
}

// max |a - b| <= tol * max(1, max |a|).
void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  double worst = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(a[i])));
  }
  char rel[32];
  std::snprintf(rel, sizeof rel, "%.3g", worst / scale);
  ::testing::Test::RecordProperty(what, rel);  // the relative worst, for the record
  EXPECT_LE(worst, tol * scale) << what << ": max |logit difference| " << worst << " (max |logit| " << scale << ")";
}

std::vector<int32_t> test_tokens(int32_t n_vocab) {
  std::vector<int32_t> t = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 17, 99, 5, 250, 31};
  for (int32_t& x : t) x %= n_vocab;
  return t;
}

void expect_hf_matches_gguf(const std::string& gguf_path, const std::string& name, bool vl_wrapper = false) {
  auto gguf = Model::open(gguf_path);
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  const fs::path dir = temp_path(name);
  hf_of(**gguf, vl_wrapper).write(dir);
  auto hf = Model::open(dir.string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ((*hf)->config().n_layers, (*gguf)->config().n_layers);
  EXPECT_EQ((*hf)->config().rope_dim, (*gguf)->config().rope_dim);
  const auto tokens = test_tokens((*gguf)->config().n_vocab);
  expect_close(all_logits(**gguf, tokens), all_logits(**hf, tokens), 1e-4, name + " HF vs GGUF");
  fs::remove_all(dir);
}

TEST(HfHybrid, Qwen35DemoModel) {
  tools::DemoModelOptions o;
  o.architecture = "qwen35";
  o.layers = 4;
  o.dim = 128;
  o.vocab = 600;
  o.ssm_key_heads = 2;  // 3 value heads per key head: the tiled and grouped orders differ
  o.ssm_value_heads = 6;
  o.ssm_head_dim = 32;
  o.type = kernels::DType::BF16;
  const fs::path path = temp_path("qwen35.gguf");
  ASSERT_TRUE(tools::write_demo_model(path.string(), o).ok());
  expect_hf_matches_gguf(path.string(), "qwen35");
  expect_hf_matches_gguf(path.string(), "qwen35-vl", /*vl_wrapper=*/true);
  fs::remove(path);
}

// The trained model: HF folder = its GGUF = its PyTorch float64 reference. hf_dir: a folder
// to open, or empty to write one from the GGUF (hf_of) into a temporary directory.
void expect_trained_qwen35_parity(const std::string& hf_dir) {
  const std::string dir = spillway::test_paths::source() + "/models/eval/qwen35/";
  std::ifstream in(dir + "parity.json");
  ASSERT_TRUE(in.good());
  const json ref = json::parse(in);
  auto gguf = Model::open(dir + ref["model"].get<std::string>());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  const fs::path written = temp_path("qwen35-trained");
  if (hf_dir.empty()) hf_of(**gguf).write(written);
  auto hf = Model::open(hf_dir.empty() ? written.string() : hf_dir);
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ((*hf)->config().n_vocab, (*gguf)->config().n_vocab);
  for (const auto& c : ref["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    std::vector<float> want;
    for (const auto& row : c["logits"]) {
      for (double v : row) want.push_back(static_cast<float>(v));
    }
    const auto from_hf = all_logits(**hf, tokens);
    expect_close(want, from_hf, 1e-4, "HF vs PyTorch");
    expect_close(all_logits(**gguf, tokens), from_hf, 1e-4, "HF vs GGUF");
  }
  fs::remove_all(written);
}

TEST(HfHybrid, Qwen35TrainedMatchesPyTorch) { expect_trained_qwen35_parity(""); }

// The folder tools/train/export_hf.py wrote from the PyTorch model (an implementation of the
// HF layout independent of hf_of above): models/eval/qwen35/hf.
TEST(HfHybrid, Qwen35PythonExportMatchesPyTorch) {
  const std::string dir = spillway::test_paths::source() + "/models/eval/qwen35/";
  expect_trained_qwen35_parity(dir + "hf");
  // Its tokenizer.json tokenizes a task prompt as the GGUF's vocabulary does.
  auto gguf = open_model_source(dir + "qwen35-tasks-f16.gguf");
  auto hf = open_model_source(dir + "hf");
  ASSERT_TRUE(gguf.ok() && hf.ok());
  auto a = Tokenizer::from_metadata((*gguf)->metadata(), "gguf");
  auto b = Tokenizer::from_metadata((*hf)->metadata(), "hf");
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  for (const char* text : {"add:12+34=", "recall:{a:1,b:2}[b]?", "<s>sort:cab="}) {
    const auto ids = (*b)->encode(text, false, true);
    EXPECT_EQ(ids.size(), std::string_view(text).size() - (text[0] == '<' ? 2 : 0)) << text;  // one per character
    EXPECT_EQ((*a)->encode(text, false, true), ids) << text;
  }
}

// Folders written by transformers itself (tools/hf_refs/make_refs.py: random weights,
// save_pretrained, and the logits transformers computes in float32; tests/data/hf_refs/README.md):
// the tensor names, shapes and config keys are the library's, not this file's idea of them.
// Every position's logits must match and pick the same token.
void expect_transformers_reference(const std::string& name, const std::string& want_arch) {
  const std::string dir = spillway::test_paths::source() + "/tests/data/hf_refs/" + name;
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  auto model = Model::open(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().architecture, want_arch) << name;
  const int32_t n_vocab = (*model)->config().n_vocab;
  for (const auto& c : ref["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    std::vector<float> want;
    for (const auto& row : c["logits"]) {
      for (double v : row) want.push_back(static_cast<float>(v));
    }
    const auto got = all_logits(**model, tokens);
    expect_close(want, got, 1e-4, name + " vs transformers");
    ASSERT_EQ(got.size(), want.size());
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      const auto row = [&](const std::vector<float>& v) { return v.begin() + pos * n_vocab; };
      EXPECT_EQ(std::max_element(row(got), row(got) + n_vocab) - row(got),
                std::max_element(row(want), row(want) + n_vocab) - row(want))
          << name << " position " << pos;
    }
  }
}

TEST(HfTransformersReference, Qwen35Text) { expect_transformers_reference("qwen3_5_text", "qwen35"); }
TEST(HfTransformersReference, Qwen35MoeText) { expect_transformers_reference("qwen3_5_moe_text", "qwen35moe"); }
TEST(HfTransformersReference, Qwen35MoeImageTextWrapper) {
  expect_transformers_reference("qwen3_5_moe", "qwen35moe");
}
TEST(HfTransformersReference, Qwen3Next) { expect_transformers_reference("qwen3_next", "qwen3next"); }

// The golden qwen3next model's weights as F32 (its file is Q8_0): a GGUF and an HF folder
// of the same values must agree.
TEST(HfHybrid, Qwen3NextFusedQkvz) {
  const std::string q8 = spillway::test_paths::testdata() + "/models/qwen3next-tiny-peaked-q8_0.gguf";
  auto model = Model::open(q8);
  ASSERT_TRUE(model.ok()) << model.error().message;
  // The F32 GGUF: every key as it is, every tensor dequantized.
  GgufWriter w;
  for (const auto& [key, value] : (*model)->source().metadata().all()) {
    if (key == "general.file_type" || key.starts_with("spillway.")) continue;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            w.set_int64(key, v);
          } else if constexpr (std::is_same_v<T, double>) {
            w.set_float32(key, static_cast<float>(v));
          } else if constexpr (std::is_same_v<T, bool>) {
            w.set_bool(key, v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            w.set_string(key, v);
          } else {
            if (v.kind == MetaArray::Kind::String) w.set_string_array(key, v.strings);
            if (v.kind == MetaArray::Kind::Int) {
              std::vector<int32_t> ints(v.ints.begin(), v.ints.end());
              w.set_int32_array(key, ints);
            }
            if (v.kind == MetaArray::Kind::Float) w.set_float32_array(key, std::vector<float>(v.floats.begin(), v.floats.end()));
            if (v.kind == MetaArray::Kind::Bool) w.set_bool_array(key, std::vector<bool>(v.bools.begin(), v.bools.end()));
          }
        },
        value);
  }
  for (const TensorInfo& t : (*model)->source().tensors()) {
    w.add_tensor(t.name, kernels::DType::F32, t.shape, blob_of(t, true).bytes);
  }
  const fs::path f32 = temp_path("qwen3next-f32.gguf");
  ASSERT_TRUE(w.write(f32.string()).ok());
  model->reset();
  expect_hf_matches_gguf(f32.string(), "qwen3next");

  // Every layer streamed from the folder (in the build tree: /tmp may be tmpfs, no O_DIRECT):
  // the fused in_proj_qkvz streams like any matrix and gives the resident logits bit for bit.
  auto gguf = Model::open(f32.string());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  const fs::path dir = fs::path(spillway::test_paths::binary()) / ("spillway-hfhybrid-" + std::to_string(::getpid()) + "-stream");
  hf_of(**gguf).write(dir);
  auto hf = Model::open(dir.string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  auto streamed = WeightResidency::create(**hf, std::vector<bool>((*hf)->config().n_layers, false), {});
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ((*streamed)->resident_layers(), 0);
  const auto tokens = test_tokens((*hf)->config().n_vocab);
  const auto resident = all_logits(**hf, tokens);
  const auto from_stream = all_logits(**hf, tokens, streamed->get());
  ASSERT_EQ(resident.size(), from_stream.size());
  EXPECT_EQ(std::memcmp(resident.data(), from_stream.data(), resident.size() * sizeof(float)), 0);
  fs::remove_all(dir);
  fs::remove(f32);
}

// Broken folders: a missing or misshaped tensor, an unknown layer type.
class HfHybridErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    tools::DemoModelOptions o;
    o.architecture = "qwen35";
    o.layers = 4;
    o.dim = 128;
    o.vocab = 600;
    o.ssm_key_heads = 2;
    o.ssm_value_heads = 4;
    o.ssm_head_dim = 32;
    o.type = kernels::DType::F32;
    gguf_ = temp_path("errors.gguf");
    ASSERT_TRUE(tools::write_demo_model(gguf_.string(), o).ok());
    auto model = Model::open(gguf_.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    folder_ = hf_of(**model);
    dir_ = temp_path("errors");
  }
  void TearDown() override {
    fs::remove(gguf_);
    fs::remove_all(dir_);
  }
  std::string open_error() {
    folder_.write(dir_);
    auto m = Model::open(dir_.string());
    EXPECT_FALSE(m.ok());
    return m.ok() ? "" : m.error().message;
  }
  fs::path gguf_, dir_;
  HfFolder folder_;
};

TEST_F(HfHybridErrors, MissingTensorNamed) {
  ASSERT_TRUE(folder_.remove("model.layers.1.linear_attn.in_proj_z.weight"));
  const std::string e = open_error();
  EXPECT_NE(e.find(dir_.string()), std::string::npos) << e;
  EXPECT_NE(e.find("blk.1.attn_gate.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.1.linear_attn.in_proj_z.weight"), std::string::npos) << e;
}

TEST_F(HfHybridErrors, MisshapedConvNamed) {
  testing::SafetensorsEntry* conv = folder_.find("model.layers.0.linear_attn.conv1d.weight");
  ASSERT_NE(conv, nullptr);
  conv->shape = {conv->shape[0], conv->shape[2]};  // [C, K]: the middle axis missing
  const std::string e = open_error();
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.0.linear_attn.conv1d.weight"), std::string::npos) << e;
}

TEST_F(HfHybridErrors, MisshapedProjectionNamed) {
  testing::SafetensorsEntry* a = folder_.find("model.layers.2.linear_attn.in_proj_a.weight");
  ASSERT_NE(a, nullptr);
  a->shape = {a->shape[1], a->shape[0]};
  const std::string e = open_error();
  EXPECT_NE(e.find("blk.2.ssm_alpha.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.2.linear_attn.in_proj_a.weight"), std::string::npos) << e;
}

TEST_F(HfHybridErrors, UnknownLayerTypeNamed) {
  folder_.config["layer_types"][2] = "mamba";
  const std::string e = open_error();
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("layer_types[2]"), std::string::npos) << e;
}

}  // namespace
}  // namespace spillway::engine

namespace spillway::engine {
namespace {

// Error messages name the HF tensor too: the reverse of gguf_tensor_name.
TEST(HfHybridNames, ReverseMappingRoundTrips) {
  for (const char* hf : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                         "model.layers.3.input_layernorm.weight", "model.layers.3.self_attn.q_norm.weight",
                         "model.layers.0.linear_attn.in_proj_qkvz.weight", "model.layers.0.linear_attn.A_log",
                         "model.layers.12.linear_attn.dt_bias", "model.layers.2.mlp.shared_expert_gate.weight",
                         "model.layers.5.mlp.experts.17.down_proj.weight", "model.layers.5.mlp.gate.weight"}) {
    EXPECT_EQ(hf_tensor_name(gguf_tensor_name(hf)), hf);
  }
  EXPECT_EQ(hf_tensor_name("blk.4.post_attention_norm.weight"), "model.layers.4.post_attention_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("blk.4.nonsense"), "");
  EXPECT_EQ(hf_tensor_name("rope_freqs.weight"), "");
}

}  // namespace
}  // namespace spillway::engine
