#include "tools/demo_model.h"

#include <unistd.h>

#include <filesystem>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "engine/format/gguf_writer.h"
#include "kernels/kernels.h"

namespace spillway::tools {

using namespace engine;  // NOLINT: tools are written against the engine's types

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's space marker
constexpr int32_t kFirstTextToken = 259;             // after <unk>, <s>, </s>, 256 bytes

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };

constexpr std::string_view kWords[] = {
    "the", "and", "was", "to", "a", "of", "in", "he", "she", "it", "they", "you", "I", "that",
    "with", "for", "on", "is", "his", "her", "said", "had", "but", "at", "one", "day", "there",
    "time", "once", "upon", "little", "big", "very", "happy", "sad", "friend", "friends", "play",
    "played", "saw", "went", "wanted", "loved", "girl", "boy", "mom", "dad", "dog", "cat", "bird",
    "tree", "park", "sun", "sky", "home", "house", "ball", "toy", "toys", "named", "Lily", "Tom",
    "Ben", "Sue", "not", "so", "up", "out", "all", "be", "have", "do", "go", "can", "will", "we",
    "what", "when", "where", "who", "how", "why", "this", "from", "by", "an", "or", "as", "are",
    "were", "would", "could", "like", "look", "looked", "help", "helped", "good", "new", "old",
    "red", "blue", "green", "water", "food", "eat", "run", "ran", "jump", "fun", "smile", "hug",
    "world", "hello", "thank", "thanks", "yes", "no", "please", "model", "token", "memory", "disk",
    "server", "stream", "layer", "spill", "way", "fast", "slow", "light", "dark", "night", "morning",
    "story", "book", "read", "write", "sing", "song", "dance", "walk", "talk", "think", "know",
    "make", "made", "find", "found", "give", "gave", "take", "took", "come", "came", "see", "get",
};

constexpr std::string_view kSyllables[] = {
    "ba", "be", "bi", "bo", "bu", "ca", "ce", "co", "da", "de", "di", "do", "fa", "fe", "fi", "ga",
    "go", "ha", "he", "hi", "ho", "ka", "ke", "ki", "la", "le", "li", "lo", "lu", "ma", "me", "mi",
    "mo", "mu", "na", "ne", "ni", "no", "pa", "pe", "pi", "po", "ra", "re", "ri", "ro", "ru", "sa",
    "se", "si", "so", "su", "ta", "te", "ti", "to", "tu", "va", "ve", "vi", "wa", "we", "ya", "zo",
    "an", "en", "in", "on", "ar", "er", "or", "st", "th", "ng", "ck", "ll",
};

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::set<std::string> seen;

  bool add(std::string piece, int32_t type = kNormal) {
    if (!seen.insert(piece).second) return false;
    scores.push_back(-static_cast<float>(tokens.size()));
    tokens.push_back(std::move(piece));
    types.push_back(type);
    return true;
  }
  // A word and every prefix of "▁word", so SentencePiece BPE merges can build it.
  void add_word(std::string_view word, size_t limit) {
    std::string piece(kSpace);
    for (char ch : word) {
      if (tokens.size() >= limit) return;
      piece += ch;
      add(piece);
    }
  }
};

Vocabulary make_vocabulary(int32_t size) {
  Vocabulary v;
  v.add("<unk>", kUnknown);
  v.add("<s>", kControl);
  v.add("</s>", kControl);
  for (int b = 0; b < 256; ++b) v.add(fmt::format("<0x{:02X}>", b), kByte);
  v.add(std::string(kSpace));
  for (char ch = 33; ch < 127; ++ch) v.add(std::string(1, ch));
  for (char ch = 33; ch < 127; ++ch) v.add(std::string(kSpace) + ch);
  const auto limit = static_cast<size_t>(size);
  for (std::string_view w : kWords) v.add_word(w, limit);
  // Generated words of 2..4 syllables until the vocabulary is full.
  const size_t n_syl = std::size(kSyllables);
  for (size_t i = 0; v.tokens.size() < limit; ++i) {
    std::string word;
    size_t x = i;
    do {
      word += kSyllables[x % n_syl];
      x /= n_syl;
    } while (x > 0);
    v.add_word(word, limit);
  }
  return v;
}

// xoshiro256** seeded through splitmix64: fast, deterministic across platforms.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed += 0x9E3779B97F4A7C15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      s = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Standard normal (Box-Muller).
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  bool has_spare_ = false;
  float spare_ = 0;
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

struct TensorSpec {
  std::string name;
  int64_t cols = 0;  // row length (GGUF shape[0])
  int64_t rows = 1;  // 1 for vectors
  enum class Init { Normal, Ones, Constant } init = Init::Normal;
  float std = 0.02f;  // Constant: the value
  bool mask_unsafe_rows = false;  // zero rows [0, kFirstTextToken)
  int64_t experts = 0;            // > 0: a 3-D expert tensor of `experts` slices of `rows` rows
  bool keep_f32 = false;          // stays F32 whatever the weight type (MoE routers)
};

// qwen35 delta-net dims of a demo model: head size, key heads, value heads.
struct DemoDeltaNet {
  int64_t state, key_heads, value_heads;
  int64_t conv_dim() const { return (2 * key_heads + value_heads) * state; }
};
DemoDeltaNet demo_delta_net(const DemoModelOptions& o) {
  const int64_t state = o.ssm_head_dim > 0 ? o.ssm_head_dim : std::min<int64_t>(128, o.dim / 2);
  const int64_t key_heads = o.ssm_key_heads > 0 ? o.ssm_key_heads : std::max<int64_t>(1, o.dim / (2 * state));
  return {state, key_heads, o.ssm_value_heads > 0 ? o.ssm_value_heads : 2 * key_heads};
}
// Attention head size: --head-dim (qwen3, qwen3moe, qwen35) or dim / heads.
int64_t demo_head_dim(const DemoModelOptions& o) { return o.head_dim > 0 ? o.head_dim : o.dim / o.heads; }
bool demo_attention_layer(const DemoModelOptions& o, int32_t i) {
  return o.architecture != "qwen35" || (i + 1) % 4 == 0;
}

// blk.N of a qwen35 demo model (hybrid_block.h's tensors), dense SwiGLU FFN.
void hybrid_layer_specs(const DemoModelOptions& o, int32_t i, std::vector<TensorSpec>& specs) {
  using I = TensorSpec::Init;
  const std::string p = fmt::format("blk.{}.", i);
  const int64_t head_dim = demo_head_dim(o), q_dim = head_dim * o.heads, kv_dim = head_dim * o.kv_heads;
  specs.push_back({p + "attn_norm.weight", o.dim, 1, I::Ones});
  if (demo_attention_layer(o, i)) {
    specs.push_back({p + "attn_q.weight", o.dim, 2 * q_dim});  // [q_h | gate_h] per head
    specs.push_back({p + "attn_k.weight", o.dim, kv_dim});
    specs.push_back({p + "attn_v.weight", o.dim, kv_dim});
    specs.push_back({p + "attn_q_norm.weight", head_dim, 1, I::Ones});
    specs.push_back({p + "attn_k_norm.weight", head_dim, 1, I::Ones});
    specs.push_back({p + "attn_output.weight", q_dim, o.dim});
  } else {
    const DemoDeltaNet d = demo_delta_net(o);
    specs.push_back({p + "attn_qkv.weight", o.dim, d.conv_dim()});
    specs.push_back({p + "attn_gate.weight", o.dim, d.value_heads * d.state});
    specs.push_back({p + "ssm_beta.weight", o.dim, d.value_heads, I::Normal, 0.02f, false, 0, true});
    specs.push_back({p + "ssm_alpha.weight", o.dim, d.value_heads, I::Normal, 0.02f, false, 0, true});
    specs.push_back({p + "ssm_conv1d.weight", 4, d.conv_dim(), I::Normal, 0.5f, false, 0, true});
    specs.push_back({p + "ssm_dt.bias", d.value_heads, 1, I::Constant, -4.0f});  // softplus ~ 0.018
    specs.push_back({p + "ssm_a", d.value_heads, 1, I::Constant, -4.0f});        // decay exp(-0.07)
    specs.push_back({p + "ssm_norm.weight", d.state, 1, I::Ones});
    specs.push_back({p + "ssm_out.weight", d.value_heads * d.state, o.dim});
  }
  specs.push_back({p + "post_attention_norm.weight", o.dim, 1, I::Ones});
  specs.push_back({p + "ffn_gate.weight", o.dim, o.ff});
  specs.push_back({p + "ffn_up.weight", o.dim, o.ff});
  specs.push_back({p + "ffn_down.weight", o.ff, o.dim});
}

std::vector<TensorSpec> tensor_specs(const DemoModelOptions& o) {
  const int64_t head_dim = demo_head_dim(o);
  const int64_t q_dim = head_dim * o.heads, kv_dim = head_dim * o.kv_heads;
  std::vector<TensorSpec> specs;
  specs.push_back({"token_embd.weight", o.dim, o.vocab, TensorSpec::Init::Normal, 0.15f});
  for (int32_t i = 0; i < o.layers; ++i) {
    if (o.architecture == "qwen35") {
      hybrid_layer_specs(o, i, specs);
      continue;
    }
    const std::string p = fmt::format("blk.{}.", i);
    specs.push_back({p + "attn_norm.weight", o.dim, 1, TensorSpec::Init::Ones});
    specs.push_back({p + "attn_q.weight", o.dim, q_dim});
    specs.push_back({p + "attn_k.weight", o.dim, kv_dim});
    specs.push_back({p + "attn_v.weight", o.dim, kv_dim});
    if (o.architecture == "qwen2" || o.architecture == "dream") {
      specs.push_back({p + "attn_q.bias", q_dim, 1});
      specs.push_back({p + "attn_k.bias", kv_dim, 1});
      specs.push_back({p + "attn_v.bias", kv_dim, 1});
    }
    if (o.architecture == "qwen3" || o.architecture == "qwen3moe") {
      specs.push_back({p + "attn_q_norm.weight", head_dim, 1, TensorSpec::Init::Ones});
      specs.push_back({p + "attn_k_norm.weight", head_dim, 1, TensorSpec::Init::Ones});
    }
    specs.push_back({p + "attn_output.weight", q_dim, o.dim});
    specs.push_back({p + "ffn_norm.weight", o.dim, 1, TensorSpec::Init::Ones});
    if (o.architecture == "qwen3moe") {
      using I = TensorSpec::Init;
      specs.push_back({p + "ffn_gate_inp.weight", o.dim, o.experts, I::Normal, 0.02f, false, 0, true});
      specs.push_back({p + "ffn_gate_exps.weight", o.dim, o.expert_ff, I::Normal, 0.02f, false, o.experts});
      specs.push_back({p + "ffn_up_exps.weight", o.dim, o.expert_ff, I::Normal, 0.02f, false, o.experts});
      specs.push_back({p + "ffn_down_exps.weight", o.expert_ff, o.dim, I::Normal, 0.02f, false, o.experts});
      continue;
    }
    specs.push_back({p + "ffn_gate.weight", o.dim, o.ff});
    specs.push_back({p + "ffn_up.weight", o.dim, o.ff});
    specs.push_back({p + "ffn_down.weight", o.ff, o.dim});
  }
  specs.push_back({"output_norm.weight", o.dim, 1, TensorSpec::Init::Ones});
  if (!o.tied_output) specs.push_back({"output.weight", o.dim, o.vocab, TensorSpec::Init::Normal, 0.5f, true});
  return specs;
}

}  // namespace

Result<DemoModelOptions> resolve_demo_model_options(DemoModelOptions o) {
  if (o.architecture != "llama" && o.architecture != "qwen2" && o.architecture != "qwen3" &&
      o.architecture != "qwen3moe" && o.architecture != "qwen35" && o.architecture != "llada" &&
      o.architecture != "dream") {
    return Error{fmt::format("--arch '{}' is not one of llama, qwen2, qwen3, qwen3moe, qwen35, llada, dream",
                             o.architecture)};
  }
  if (o.layers < 1 || o.dim < 64 || o.vocab < 512 || o.context < 16) {
    return Error{"need --layers >= 1, --dim >= 64, --vocab >= 512, --context >= 16"};
  }
  if (o.heads == 0) o.heads = std::max(1, o.dim / 64);
  if (o.kv_heads == 0) o.kv_heads = std::max(1, o.heads / 2);
  if (o.ff == 0) o.ff = (o.dim * 8 / 3 + 63) / 64 * 64;
  if (o.architecture != "qwen35" && (o.ssm_key_heads != 0 || o.ssm_value_heads != 0 || o.ssm_head_dim != 0)) {
    return Error{"--ssm-* apply to --arch qwen35 only"};
  }
  if (o.head_dim != 0 && o.architecture != "qwen35" && o.architecture != "qwen3" && o.architecture != "qwen3moe") {
    return Error{"--head-dim applies to --arch qwen3, qwen3moe and qwen35 only"};
  }
  if (o.head_dim < 0 || o.head_dim % 2 != 0 || o.ssm_key_heads < 0 || o.ssm_value_heads < 0 || o.ssm_head_dim < 0) {
    return Error{"--head-dim must be even and --ssm-* non-negative"};
  }
  if (o.architecture == "qwen35") {
    const DemoDeltaNet d = demo_delta_net(o);
    const int64_t block = kernels::block_elems(o.type);
    if (d.value_heads % d.key_heads != 0 || (d.value_heads * d.state) % block != 0 ||
        (demo_head_dim(o) * o.heads) % block != 0) {
      return Error{fmt::format("qwen35: {} value heads must be a multiple of {} key heads, and value heads x {} "
                               "and heads x head size multiples of the {} block",
                               d.value_heads, d.key_heads, d.state, kernels::dtype_name(o.type))};
    }
  }
  if ((o.head_dim == 0 && o.dim % o.heads != 0) || o.heads % o.kv_heads != 0 || demo_head_dim(o) % 2 != 0) {
    return Error{fmt::format("--dim {} / --heads {} / --kv-heads {} do not divide evenly", o.dim,
                             o.heads, o.kv_heads)};
  }
  const int64_t block = kernels::block_elems(o.type);
  if (o.dim % block != 0 || o.ff % block != 0 || (demo_head_dim(o) * o.heads) % block != 0) {
    return Error{fmt::format("--dim {} and --ff {} must be multiples of the {} block ({})", o.dim,
                             o.ff, kernels::dtype_name(o.type), block)};
  }
  if (o.architecture == "qwen3moe") {
    if (o.expert_ff == 0) o.expert_ff = static_cast<int32_t>((o.ff / 4 + block - 1) / block * block);
    if (o.experts < 1 || o.experts_used < 1 || o.experts_used > o.experts) {
      return Error{fmt::format("need 1 <= --experts-used ({}) <= --experts ({})", o.experts_used, o.experts)};
    }
    if (o.expert_ff % block != 0) {
      return Error{fmt::format("--expert-ff {} must be a multiple of the {} block ({})", o.expert_ff,
                               kernels::dtype_name(o.type), block)};
    }
  }
  return o;
}

// The tensors an _M mix stores in Q6_K: output.weight, and attn_v / ffn_down of layer i when
// i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2 (llama.cpp's use_more_bits).
static bool more_bits(const std::string& name, int32_t n_layers) {
  if (name == "output.weight") return true;
  int layer = 0;
  char kind[32] = {};
  if (std::sscanf(name.c_str(), "blk.%d.%31[a-z_]", &layer, kind) != 2) return false;
  const std::string k = kind;
  if (k != "attn_v" && k != "ffn_down") return false;
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

Status write_demo_model(const std::string& path, const DemoModelOptions& options,
                        const std::function<void(int64_t, int64_t)>& progress) {
  auto resolved = resolve_demo_model_options(options);
  if (!resolved) return resolved.error();
  const DemoModelOptions& o = *resolved;
  const std::string& arch = o.architecture;
  Vocabulary vocab = make_vocabulary(o.vocab);
  const bool diffusion = arch == "llada" || arch == "dream";
  const int32_t mask_token = o.vocab - 1;  // diffusion: the last id becomes the mask token
  if (diffusion) {
    vocab.tokens[mask_token] = "<|mdm_mask|>";
    vocab.types[mask_token] = kControl;
  }

  GgufWriter writer;
  writer.set_string("general.architecture", arch);
  writer.set_string("general.name", fmt::format("spillway-demo-{}", arch));
  writer.set_string("general.description",
                    "Spillway demo model: deterministic random weights (not trained); ids 0-258 "
                    "are never generated");
  writer.set_uint32(arch + ".block_count", o.layers);
  writer.set_uint32(arch + ".context_length", o.context);
  writer.set_uint32(arch + ".embedding_length", o.dim);
  writer.set_uint32(arch + ".feed_forward_length", o.ff);
  writer.set_uint32(arch + ".attention.head_count", o.heads);
  writer.set_uint32(arch + ".attention.head_count_kv", o.kv_heads);
  const auto head_dim = static_cast<int32_t>(demo_head_dim(o));
  if (o.head_dim > 0) {
    writer.set_uint32(arch + ".attention.key_length", head_dim);
    writer.set_uint32(arch + ".attention.value_length", head_dim);
  }
  // qwen35: partial rope over a quarter of each head (as Qwen3.5), at least 2 dims.
  writer.set_uint32(arch + ".rope.dimension_count", arch == "qwen35" ? std::max(2, head_dim / 4 / 2 * 2) : head_dim);
  writer.set_float32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (arch == "qwen3moe") {
    writer.set_uint32(arch + ".expert_count", o.experts);
    writer.set_uint32(arch + ".expert_used_count", o.experts_used);
    writer.set_uint32(arch + ".expert_feed_forward_length", o.expert_ff);
  }
  if (arch == "qwen35") {
    const DemoDeltaNet d = demo_delta_net(o);
    writer.set_uint32(arch + ".ssm.conv_kernel", 4);
    writer.set_uint32(arch + ".ssm.state_size", static_cast<uint32_t>(d.state));
    writer.set_uint32(arch + ".ssm.group_count", static_cast<uint32_t>(d.key_heads));
    writer.set_uint32(arch + ".ssm.time_step_rank", static_cast<uint32_t>(d.value_heads));
    writer.set_uint32(arch + ".ssm.inner_size", static_cast<uint32_t>(d.value_heads * d.state));
    writer.set_uint32(arch + ".full_attention_interval", 4);
  }
  writer.set_float32(arch + ".rope.freq_base", 10000.0f);
  if (diffusion) {
    // llada writes shift_logits = false; dream leaves it out (true: row p - 1 predicts p).
    writer.set_bool(arch + ".attention.causal", false);
    writer.set_uint32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask_token));
    if (arch == "llada") writer.set_bool("diffusion.shift_logits", false);
  }
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string("tokenizer.ggml.pre", "default");
  writer.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  writer.set_float32_array("tokenizer.ggml.scores", vocab.scores);
  writer.set_int32_array("tokenizer.ggml.token_type", vocab.types);
  writer.set_uint32("tokenizer.ggml.unknown_token_id", 0);
  writer.set_uint32("tokenizer.ggml.bos_token_id", 1);
  writer.set_uint32("tokenizer.ggml.eos_token_id", 2);
  writer.set_bool("tokenizer.ggml.add_bos_token", true);
  writer.set_bool("tokenizer.ggml.add_eos_token", false);
  writer.set_string("tokenizer.chat_template",
                    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
                    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}");

  const std::vector<TensorSpec> specs = tensor_specs(o);
  int64_t done = 0;
  std::vector<float> values;
  for (const TensorSpec& spec : specs) {
    const bool is_matrix = spec.rows > 1;
    const kernels::DType type = !is_matrix || spec.keep_f32                  ? kernels::DType::F32
                                : o.k_mix && more_bits(spec.name, o.layers) ? kernels::DType::Q6_K
                                                                             : o.type;
    const int64_t rows = spec.rows * std::max<int64_t>(spec.experts, 1);  // expert slices stacked
    // Row by row (the same values, in the same order, as filling the whole tensor first), so
    // large expert tensors never exist as floats.
    Rng rng(o.seed * 0x100000001b3ULL ^ fnv1a(spec.name));
    values.resize(static_cast<size_t>(spec.cols));
    const int64_t rb = kernels::row_bytes(type, spec.cols);
    std::vector<uint8_t> bytes(static_cast<size_t>(rb * rows));
    for (int64_t r = 0; r < rows; ++r) {
      if (spec.init == TensorSpec::Init::Ones) {
        std::fill(values.begin(), values.end(), 1.0f);
      } else if (spec.init == TensorSpec::Init::Constant) {
        std::fill(values.begin(), values.end(), spec.std);
      } else {
        for (float& x : values) x = rng.normal() * spec.std;
      }
      if (spec.mask_unsafe_rows && (r < kFirstTextToken || (diffusion && r == mask_token))) {
        std::fill(values.begin(), values.end(), 0.0f);  // never generated (the mask token neither)
      }
      kernels::quantize_row(type, values.data(), bytes.data() + r * rb, spec.cols);
    }
    std::vector<int64_t> shape = spec.experts > 0 ? std::vector<int64_t>{spec.cols, spec.rows, spec.experts}
                                 : is_matrix       ? std::vector<int64_t>{spec.cols, spec.rows}
                                                   : std::vector<int64_t>{spec.cols};
    writer.add_tensor(spec.name, type, shape, std::move(bytes));
    if (progress) progress(++done, static_cast<int64_t>(specs.size()));
  }
  return writer.write(path);
}

Status write_default_demo_model(const std::string& path,
                                const std::function<void(int64_t done, int64_t total)>& progress) {
  namespace fs = std::filesystem;
  auto options = resolve_demo_model_options(DemoModelOptions{});
  if (!options) return options.error();
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) return Error{fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message())};
  const std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
  Status written = write_demo_model(tmp, *options, progress);
  if (!written) {
    fs::remove(tmp, ec);
    return written;
  }
  fs::rename(tmp, target, ec);
  if (ec) return Error{fmt::format("cannot move {} to {}: {}", tmp, path, ec.message())};
  return {};
}

Status apply_demo_shape(const std::string& shape, DemoModelOptions& o) {
  // Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json): 48 layers, hidden 2048, 32 query / 4 KV
  // heads of 128 (q is 4096 wide, wider than the hidden size), 128 routed experts per layer of
  // which 8 are used, expert hidden size 768, no shared expert, a 151,936 vocabulary (here the
  // generated one), untied output. The dense `ff` (6144) is written to the header only.
  // Not copied: rope theta (1e6; the demo writes 10000) and rms eps (1e-6; 1e-5) — random
  // weights make them irrelevant to speed and I/O. ~30.5B parameters at 48 layers.
  if (shape == "qwen3-30b-a3b") {
    o.architecture = "qwen3moe";
    o.layers = 48;
    o.dim = 2048;
    o.ff = 6144;
    o.heads = 32;
    o.kv_heads = 4;
    o.head_dim = 128;
    o.vocab = 151936;
    o.experts = 128;
    o.experts_used = 8;
    o.expert_ff = 768;
    return Status::Ok();
  }
  // Qwen3.5 small dense hybrids: 24 layers (every 4th gated attention, 8 query / 2 KV heads of
  // 256), Gated DeltaNet with 16 key and 16 value heads of 128, a 248k vocabulary (here the
  // generated one, untied output). ~1.0B / ~2.1B parameters with the untied output.
  if (shape != "qwen35-0.8b" && shape != "qwen35-2b") {
    return Error{fmt::format("--shape '{}' is not one of qwen35-0.8b, qwen35-2b, qwen3-30b-a3b", shape)};
  }
  const bool small = shape == "qwen35-0.8b";
  o.architecture = "qwen35";
  o.layers = 24;
  o.dim = small ? 1024 : 2048;
  o.ff = small ? 3584 : 6144;
  o.heads = 8;
  o.kv_heads = 2;
  o.head_dim = 256;
  o.ssm_key_heads = 16;
  o.ssm_value_heads = 16;
  o.ssm_head_dim = 128;
  o.vocab = 248320;
  return Status::Ok();
}

}  // namespace spillway::tools
