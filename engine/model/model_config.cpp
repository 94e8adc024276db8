#include "engine/model/model_config.h"

#include "engine/model/arch/architecture.h"

#include <cassert>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace spillway::engine {

namespace {


// Reads `<arch>.<suffix>` as a positive int32, or returns def when absent (def < 0: required).
Result<int32_t> read_dim(const ModelSource& src, const std::string& arch, std::string_view suffix,
                         int64_t def) {
  const std::string key = arch + "." + std::string(suffix);
  auto v = src.metadata().get_int(key);
  if (!v) return v.error();
  if (!v->has_value()) {
    if (def < 0) return Error{fmt::format("{}: missing metadata key '{}'", src.path(), key)};
    return static_cast<int32_t>(def);
  }
  const int64_t x = **v;
  if (x <= 0 || x > (int64_t{1} << 24)) {
    return Error{fmt::format("{}: metadata '{}' = {} is out of range", src.path(), key, x)};
  }
  return static_cast<int32_t>(x);
}

Result<float> read_float(const ModelSource& src, const std::string& key, float def) {
  auto v = src.metadata().get_float(key);
  if (!v) return v.error();
  if (!v->has_value()) return def;
  const double x = **v;
  if (!std::isfinite(x)) {
    return Error{fmt::format("{}: metadata '{}' is not finite", src.path(), key)};
  }
  return static_cast<float>(x);
}

}  // namespace

int32_t ModelConfig::n_attention_layers() const {
  int32_t n = 0;
  for (const LayerSpec& s : layers) n += s.mixer == MixerKind::Attention ? 1 : 0;
  return n;
}

bool ModelConfig::is_diffusion() const {
  for (const LayerSpec& s : layers) {
    if (s.mixer == MixerKind::Attention && s.attention == AttentionKind::Bidirectional) return true;
  }
  return false;
}

std::vector<float> llama3_rope_freq_factors(int32_t rope_dim, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int32_t original_context_length) {
  // As Meta's reference (and llama.cpp's converter): long wavelengths are divided by
  // `factor`, short ones kept, and the band between interpolated smoothly.
  const double low_freq_wavelen = original_context_length / low_freq_factor;
  const double high_freq_wavelen = original_context_length / high_freq_factor;
  std::vector<float> factors(rope_dim / 2);
  for (int32_t i = 0; i < rope_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(freq_base), 2.0 * i / rope_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      factors[i] = 1.0f;
    } else if (wavelen > low_freq_wavelen) {
      factors[i] = factor;
    } else {
      const double smooth = (original_context_length / wavelen - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      factors[i] = static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth));
    }
  }
  return factors;
}

Result<ModelConfig> read_model_config(const ModelSource& src) {
  const Metadata& meta = src.metadata();
  auto arch_name = meta.get_string("general.architecture");
  if (!arch_name) return arch_name.error();
  if (!arch_name->has_value()) {
    return Error{fmt::format("{}: missing metadata key 'general.architecture'", src.path())};
  }
  const std::string arch = **arch_name;
  const Architecture* architecture = find_architecture(arch);
  if (!architecture) {
    return Error{fmt::format("{}: unsupported architecture '{}' (supported: {})", src.path(),
                             arch, supported_architectures())};
  }

  ModelConfig c;
  c.architecture = arch;
  c.traits = architecture->traits;
  const ArchitectureTraits* traits = &architecture->traits;
  ASSIGN_OR_RETURN(c.n_layers, read_dim(src, arch, "block_count", -1));
  ASSIGN_OR_RETURN(c.n_embd, read_dim(src, arch, "embedding_length", -1));
  ASSIGN_OR_RETURN(c.n_ff, read_dim(src, arch, "feed_forward_length", -1));
  ASSIGN_OR_RETURN(c.n_heads, read_dim(src, arch, "attention.head_count", -1));
  ASSIGN_OR_RETURN(c.n_kv_heads, read_dim(src, arch, "attention.head_count_kv", c.n_heads));
  ASSIGN_OR_RETURN(c.head_dim, read_dim(src, arch, "attention.key_length", c.n_embd / c.n_heads));
  ASSIGN_OR_RETURN(c.n_ctx_train, read_dim(src, arch, "context_length", 4096));
  ASSIGN_OR_RETURN(c.rope_dim, read_dim(src, arch, "rope.dimension_count", c.head_dim));

  auto value_length = read_dim(src, arch, "attention.value_length", c.head_dim);
  if (!value_length) return value_length.error();
  if (*value_length != c.head_dim) {
    return Error{fmt::format("{}: attention.value_length {} != key_length {} is not supported",
                             src.path(), *value_length, c.head_dim)};
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return Error{fmt::format("{}: head_count {} is not a multiple of head_count_kv {}",
                             src.path(), c.n_heads, c.n_kv_heads)};
  }
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return Error{fmt::format("{}: rope.dimension_count {} does not fit head size {}", src.path(),
                             c.rope_dim, c.head_dim)};
  }

  auto eps = read_float(src, arch + ".attention.layer_norm_rms_epsilon", traits->default_rms_eps);
  if (!eps) return eps.error();
  c.rms_eps = *eps;
  auto base = read_float(src, arch + ".rope.freq_base", 10000.0f);
  if (!base) return base.error();
  c.rope_freq_base = *base;

  // HF llama checkpoints keep q/k in the rotate-half layout (GGUF converters permute them
  // into interleaved pairs instead), so the rope layout depends on the source format.
  auto source_format = meta.get_string("spillway.source_format");
  if (!source_format) return source_format.error();
  const bool from_hf = source_format->value_or("") == "huggingface";
  c.rope_style = from_hf ? kernels::RopeStyle::HalfSplit : traits->gguf_rope;

  auto scaling = meta.get_string(arch + ".rope.scaling.type");
  if (!scaling) return scaling.error();
  const std::string scaling_type = scaling->value_or("none");
  auto factor = read_float(src, arch + ".rope.scaling.factor", 1.0f);
  if (!factor) return factor.error();
  if (scaling_type == "linear") {
    if (*factor <= 0) return Error{fmt::format("{}: rope.scaling.factor must be > 0", src.path())};
    c.rope_freq_scale = 1.0f / *factor;
  } else if (scaling_type == "llama3") {
    auto low = read_float(src, arch + ".rope.scaling.low_freq_factor", 1.0f);
    auto high = read_float(src, arch + ".rope.scaling.high_freq_factor", 4.0f);
    auto orig = read_dim(src, arch, "rope.scaling.original_context_length", 8192);
    if (!low) return low.error();
    if (!high) return high.error();
    if (!orig) return orig.error();
    c.rope_freq_factors = llama3_rope_freq_factors(c.rope_dim, c.rope_freq_base, *factor, *low,
                                                   *high, *orig);
  } else if (scaling_type != "none" && scaling_type != "") {
    return Error{fmt::format("{}: rope scaling type '{}' is not supported (none, linear, llama3)",
                             src.path(), scaling_type)};
  }
  SPILLWAY_TRY(architecture->describe_layers(src, c));
  assert(static_cast<int32_t>(c.layers.size()) == c.n_layers);
  return c;
}

}  // namespace spillway::engine
