#include "engine/format/hf_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace spillway::engine {

namespace {

using nlohmann::json;

// transformers' defaults for keys a config.json may leave out.
struct ModelTypeDefaults {
  std::string_view model_type;
  int64_t max_position_embeddings;
  double rms_norm_eps;
  double rope_theta;
};

constexpr ModelTypeDefaults kModelTypes[] = {
    {"llama", 2048, 1e-6, 10000.0},
    {"qwen2", 32768, 1e-6, 10000.0},
    {"qwen3", 32768, 1e-6, 10000.0},
    {"qwen3_moe", 32768, 1e-6, 10000.0},
    {"qwen3_next", 32768, 1e-6, 10000.0},
    {"qwen3_5_text", 32768, 1e-6, 10000.0},
    {"qwen3_5", 32768, 1e-6, 10000.0},  // the image-text wrapper: its text_config is read
    {"qwen3_5_moe_text", 32768, 1e-6, 10000.0},
    {"qwen3_5_moe", 32768, 1e-6, 10000.0},  // the image-text wrapper, as qwen3_5
};

// The engine's architecture name of a model_type, where they differ.
std::string architecture_of(std::string_view model_type) {
  if (model_type == "qwen3_moe") return "qwen3moe";
  if (model_type == "qwen3_next") return "qwen3next";
  if (model_type == "qwen3_5_text" || model_type == "qwen3_5") return "qwen35";
  if (model_type == "qwen3_5_moe_text" || model_type == "qwen3_5_moe") return "qwen35moe";
  return std::string(model_type);
}

bool is_hybrid(std::string_view arch) { return arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe"; }

// The image-text wrappers keep the language model's keys in text_config.
bool is_image_text_wrapper(const nlohmann::json& model_type) {
  return model_type == "qwen3_5" || model_type == "qwen3_5_moe";
}



// Typed reads of config.json keys; a JSON null counts as absent (transformers writes
// "head_dim": null, "rope_scaling": null). Errors name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const std::string& path, const json& object, std::string prefix = "")
      : path_(path), object_(object), prefix_(std::move(prefix)) {}

  const json& object() const { return object_; }
  const json* find(std::string_view key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  Error missing(std::string_view key) const {
    return Error{fmt::format("{}: missing key '{}{}'", path_, prefix_, key)};
  }
  Error invalid(std::string_view key, std::string_view expected) const {
    return Error{fmt::format("{}: key '{}{}' is {}, expected {}", path_, prefix_, key,
                             find(key)->dump(), expected)};
  }

  // A positive integer that fits int32; nullopt when absent.
  Result<std::optional<int64_t>> positive_int(std::string_view key) const {
    const json* v = find(key);
    if (!v) return std::optional<int64_t>();
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 ||
        v->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return invalid(key, "a positive integer");
    }
    return std::optional<int64_t>(v->get<int64_t>());
  }
  Result<int64_t> required_positive_int(std::string_view key) const {
    auto v = positive_int(key);
    if (!v) return v.error();
    if (!v->has_value()) return missing(key);
    return **v;
  }

  // A finite number; nullopt when absent.
  Result<std::optional<double>> number(std::string_view key) const {
    const json* v = find(key);
    if (!v) return std::optional<double>();
    if (!v->is_number() || !std::isfinite(v->get<double>())) return invalid(key, "a number");
    return std::optional<double>(v->get<double>());
  }
  Result<double> positive_number(std::string_view key, std::optional<double> def) const {
    auto v = number(key);
    if (!v) return v.error();
    if (!v->has_value()) {
      if (!def) return missing(key);
      return *def;
    }
    if (**v <= 0) return invalid(key, "a positive number");
    return **v;
  }

  Result<std::optional<bool>> boolean(std::string_view key) const {
    const json* v = find(key);
    if (!v) return std::optional<bool>();
    if (!v->is_boolean()) return invalid(key, "true or false");
    return std::optional<bool>(v->get<bool>());
  }

  Result<std::optional<std::string>> string(std::string_view key) const {
    const json* v = find(key);
    if (!v) return std::optional<std::string>();
    if (!v->is_string()) return invalid(key, "a string");
    return std::optional<std::string>(v->get<std::string>());
  }

  // A single integer token id; a list (several EOS ids) is left to the tokenizer files.
  std::optional<int64_t> token_id(std::string_view key) const {
    const json* v = find(key);
    if (!v || !v->is_number_integer() || v->get<int64_t>() < 0) return std::nullopt;
    return v->get<int64_t>();
  }

 private:
  const std::string& path_;
  const json& object_;
  std::string prefix_;
};

Result<json> read_json_object(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot open", path)};
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    return Error{fmt::format("{}: not valid JSON ({})", path, e.what())};
  }
  if (!j.is_object()) return Error{fmt::format("{}: not a JSON object", path)};
  return j;
}

// rope_scaling (transformers < 5) or rope_parameters (>= 5) -> <arch>.rope.scaling.*.
Status import_rope_scaling(const std::string& path, const json& scaling, const char* field,
                           const std::string& arch, Metadata& meta) {
  if (!scaling.is_object()) {
    return Error{fmt::format("{}: key '{}' is {}, expected an object", path, field,
                             scaling.dump())};
  }
  const ConfigReader r(path, scaling, std::string(field) + ".");
  const char* type_key = r.find("rope_type") ? "rope_type" : "type";
  auto rope_type = r.string(type_key);
  if (!rope_type) return rope_type.error();
  const std::string type = rope_type->value_or("default");
  if (type == "default") return {};
  if (type != "linear" && type != "llama3") {
    return Error{fmt::format("{}: key '{}.{}' = '{}' is not supported (default, linear, llama3)",
                             path, field, type_key, type)};
  }
  const std::string prefix = arch + ".rope.scaling.";
  meta.set(prefix + "type", type);
  auto factor = r.positive_number("factor", std::nullopt);
  if (!factor) return factor.error();
  meta.set(prefix + "factor", *factor);
  if (type == "llama3") {
    auto low = r.positive_number("low_freq_factor", std::nullopt);
    if (!low) return low.error();
    auto high = r.positive_number("high_freq_factor", std::nullopt);
    if (!high) return high.error();
    auto original = r.required_positive_int("original_max_position_embeddings");
    if (!original) return original.error();
    if (*high <= *low) {
      return Error{fmt::format("{}: key '{}.high_freq_factor' must be larger than "
                               "low_freq_factor",
                               path, field)};
    }
    meta.set(prefix + "low_freq_factor", *low);
    meta.set(prefix + "high_freq_factor", *high);
    meta.set(prefix + "original_context_length", *original);
  }
  return {};
}

}  // namespace

std::string supported_hf_model_types() {
  std::string out;
  for (const auto& t : kModelTypes) {
    if (!out.empty()) out += ", ";
    out += t.model_type;
  }
  return out;
}

// qwen3_moe: the expert keys, as GGUF metadata (model/arch/moe_block.h reads them).
static Status import_moe_config(const std::string& path, const ConfigReader& r, const std::string& arch, Metadata& meta,
                                bool default_norm_topk = false) {
  const std::string p = arch + ".";
  for (const auto& [hf, gguf] : {std::pair{"num_experts", "expert_count"}, std::pair{"num_experts_per_tok", "expert_used_count"},
                                 std::pair{"moe_intermediate_size", "expert_feed_forward_length"}}) {
    auto v = r.required_positive_int(hf);
    if (!v) return v.error();
    meta.set(p + gguf, *v);
  }
  // transformers' Qwen3MoeConfig default: false (Qwen3-30B-A3B's config says true).
  auto norm = r.boolean("norm_topk_prob");
  if (!norm) return norm.error();
  meta.set(p + "expert_weights_norm", norm->value_or(default_norm_topk));
  auto step = r.positive_int("decoder_sparse_step");
  if (!step) return step.error();
  if (step->value_or(1) != 1) {
    return Error{fmt::format("{}: key 'decoder_sparse_step' = {} is not supported (1: every layer MoE)", path, **step)};
  }
  if (const json* dense = r.find("mlp_only_layers"); dense && !(dense->is_array() && dense->empty())) {
    return Error{fmt::format("{}: key 'mlp_only_layers' = {} is not supported (every layer MoE)", path, dense->dump())};
  }
  return {};
}


// qwen3_next / qwen3_5_text: the gated-delta-net keys (model/arch/hybrid_block.h reads them).
// transformers' Qwen3NextConfig defaults fill absent keys. HF checkpoints keep each key
// head's value heads together (v-head h reads k-head h / (nv / nk)); llama.cpp's qwen35
// converter reorders them "tiled" instead, so spillway.ssm_value_heads_grouped says which.
static Status import_hybrid_config(const std::string& path, const ConfigReader& r, const std::string& arch,
                                   int64_t n_layers, int64_t head_dim, const json* rope_parameters, Metadata& meta) {
  const std::string p = arch + ".";
  auto read = [&](const char* key, int64_t def) -> Result<int64_t> {
    auto v = r.positive_int(key);
    if (!v) return v.error();
    return v->value_or(def);
  };
  int64_t conv = 0, dk = 0, dv = 0, nk = 0, nv = 0;
  ASSIGN_OR_RETURN(conv, read("linear_conv_kernel_dim", 4));
  ASSIGN_OR_RETURN(dk, read("linear_key_head_dim", 128));
  ASSIGN_OR_RETURN(dv, read("linear_value_head_dim", 128));
  ASSIGN_OR_RETURN(nk, read("linear_num_key_heads", 16));
  ASSIGN_OR_RETURN(nv, read("linear_num_value_heads", 32));
  if (dk != dv) {
    return Error{fmt::format("{}: linear_key_head_dim {} != linear_value_head_dim {} is not supported", path, dk, dv)};
  }
  if (nv % nk != 0) {
    return Error{fmt::format("{}: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}", path, nv,
                             nk)};
  }
  meta.set(p + "ssm.conv_kernel", conv);
  meta.set(p + "ssm.state_size", dk);
  meta.set(p + "ssm.group_count", nk);
  meta.set(p + "ssm.time_step_rank", nv);
  meta.set(p + "ssm.inner_size", nv * dv);
  meta.set("spillway.ssm_value_heads_grouped", true);

  if (const json* types = r.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != n_layers) {
      return r.invalid("layer_types", fmt::format("an array of {} layer types", n_layers));
    }
    MetaArray recurrent;
    recurrent.kind = MetaArray::Kind::Bool;
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const bool linear = t.is_string() && t.get<std::string>() == "linear_attention";
      if (!linear && !(t.is_string() && t.get<std::string>() == "full_attention")) {
        return Error{fmt::format("{}: key 'layer_types[{}]' = {} is not supported (linear_attention, "
                                 "full_attention)",
                                 path, i, t.dump())};
      }
      recurrent.bools.push_back(linear ? 1 : 0);
    }
    meta.set(p + "attention.recurrent_layers", std::move(recurrent));
  } else {
    int64_t interval = 0;
    ASSIGN_OR_RETURN(interval, read("full_attention_interval", 4));
    meta.set(p + "full_attention_interval", interval);
  }

  // partial_rotary_factor: top level (qwen3_next) or inside rope_parameters (qwen3_5), which
  // wins when both are there (transformers 5 writes both; tests/data/hf_refs).
  double factor = 0.25;
  for (const json* where : {&r.object(), rope_parameters}) {
    if (!where || !where->is_object() || !where->contains("partial_rotary_factor")) continue;
    const ConfigReader pr(path, *where, where == rope_parameters ? "rope_parameters." : "");
    auto f = pr.positive_number("partial_rotary_factor", std::nullopt);
    if (!f) return f.error();
    factor = *f;
  }
  const double rot = head_dim * factor;
  if (factor > 1 || rot != std::floor(rot) || static_cast<int64_t>(rot) % 2 != 0) {
    return Error{fmt::format("{}: partial_rotary_factor {} of head_dim {} is not an even number of dims", path,
                             factor, head_dim)};
  }
  meta.set(p + "rope.dimension_count", static_cast<int64_t>(rot));

  // Qwen3-Next and Qwen3.5-MoE: every layer MoE with a sigmoid-gated shared expert; Qwen3.5-MoE
  // configs have no norm_topk_prob (its router always renormalises the top k).
  if (arch == "qwen3next" || arch == "qwen35moe") {
    SPILLWAY_TRY(import_moe_config(path, r, arch, meta, /*default_norm_topk=*/true));
    auto shared = r.positive_int("shared_expert_intermediate_size");
    if (!shared) return shared.error();
    if (shared->has_value()) meta.set(p + "expert_shared_feed_forward_length", **shared);
  }
  return {};
}

Result<HfConfig> import_hf_config(const std::string& path, Metadata& meta) {
  auto file = read_json_object(path);
  if (!file) return file.error();
  // qwen3_5 / qwen3_5_moe (image-text) keep the language model's keys in text_config.
  const json* config = &*file;
  if (auto it = file->find("model_type"); it != file->end() && is_image_text_wrapper(*it)) {
    auto text = file->find("text_config");
    if (text == file->end() || !text->is_object()) {
      return Error{fmt::format("{}: model_type '{}' needs a 'text_config' object", path, it->get<std::string>())};
    }
    config = &*text;
  }
  const ConfigReader r(path, *config, config == &*file ? "" : "text_config.");

  auto model_type = ConfigReader(path, *file).string("model_type");
  if (!model_type) return model_type.error();
  if (!model_type->has_value()) return r.missing("model_type");
  const ModelTypeDefaults* defaults = nullptr;
  for (const auto& t : kModelTypes) {
    if (t.model_type == **model_type) defaults = &t;
  }
  if (!defaults) {
    return Error{fmt::format("{}: model_type '{}' is not supported (supported: {})", path,
                             **model_type, supported_hf_model_types())};
  }
  const std::string arch = architecture_of(defaults->model_type);
  HfConfig out;
  out.model_type = arch;

  auto hidden_act = r.string("hidden_act");
  if (!hidden_act) return hidden_act.error();
  if (hidden_act->value_or("silu") != "silu") {
    return Error{fmt::format("{}: key 'hidden_act' = '{}' is not supported (silu)", path,
                             **hidden_act)};
  }
  auto sliding = r.boolean("use_sliding_window");
  if (!sliding) return sliding.error();
  if (sliding->value_or(false)) {
    return Error{fmt::format("{}: key 'use_sliding_window' = true is not supported", path)};
  }

  // Biases the engine does not apply (o_proj / MLP) must not be dropped silently.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    auto bias = r.boolean(key);
    if (!bias) return bias.error();
    if (bias->value_or(false)) {
      return Error{fmt::format("{}: key '{}' = true is not supported", path, key)};
    }
  }

  auto hidden = r.required_positive_int("hidden_size");
  if (!hidden) return hidden.error();
  auto layers = r.required_positive_int("num_hidden_layers");
  if (!layers) return layers.error();
  // Qwen3.5-MoE has no dense FFN and no intermediate_size: its experts' size stands in.
  auto ff = r.required_positive_int(arch == "qwen35moe" && !r.find("intermediate_size") ? "moe_intermediate_size"
                                                                                          : "intermediate_size");
  if (!ff) return ff.error();
  auto heads = r.required_positive_int("num_attention_heads");
  if (!heads) return heads.error();
  auto kv_heads = r.positive_int("num_key_value_heads");
  if (!kv_heads) return kv_heads.error();
  auto head_dim = r.positive_int("head_dim");
  if (!head_dim) return head_dim.error();
  // transformers' Qwen3NextConfig / Qwen3_5TextConfig default head_dim: 256.
  const bool hybrid = is_hybrid(arch);
  if (!head_dim->has_value() && hybrid) *head_dim = 256;
  if (!head_dim->has_value() && *hidden % *heads != 0) {
    return Error{fmt::format("{}: hidden_size {} is not a multiple of num_attention_heads {} and "
                             "there is no 'head_dim'",
                             path, *hidden, *heads)};
  }
  auto context = r.positive_int("max_position_embeddings");
  if (!context) return context.error();
  auto vocab = r.positive_int("vocab_size");
  if (!vocab) return vocab.error();
  auto eps = r.positive_number("rms_norm_eps", defaults->rms_norm_eps);
  if (!eps) return eps.error();

  // transformers >= 5 keeps rope_theta and the scaling inside rope_parameters.
  const json* rope_parameters = r.find("rope_parameters");
  double rope_theta = defaults->rope_theta;
  if (r.find("rope_theta")) {
    auto theta = r.positive_number("rope_theta", std::nullopt);
    if (!theta) return theta.error();
    rope_theta = *theta;
  } else if (rope_parameters && rope_parameters->is_object()) {
    auto theta = ConfigReader(path, *rope_parameters, "rope_parameters.")
                     .positive_number("rope_theta", defaults->rope_theta);
    if (!theta) return theta.error();
    rope_theta = *theta;
  }

  auto tie = r.find("tie_word_embeddings") ? r.boolean("tie_word_embeddings")
                                            : ConfigReader(path, *file).boolean("tie_word_embeddings");
  if (!tie) return tie.error();
  out.tie_word_embeddings = tie->value_or(false);
  out.bos_token_id = r.token_id("bos_token_id");
  out.eos_token_id = r.token_id("eos_token_id");

  meta.set("general.architecture", arch);
  const std::string p = arch + ".";
  meta.set(p + "embedding_length", *hidden);
  meta.set(p + "block_count", *layers);
  meta.set(p + "feed_forward_length", *ff);
  meta.set(p + "attention.head_count", *heads);
  meta.set(p + "attention.head_count_kv", kv_heads->value_or(*heads));
  const int64_t key_length = head_dim->value_or(*hidden / *heads);
  meta.set(p + "attention.key_length", key_length);
  meta.set(p + "attention.value_length", key_length);
  meta.set(p + "attention.layer_norm_rms_epsilon", *eps);
  meta.set(p + "rope.freq_base", rope_theta);
  meta.set(p + "context_length", context->value_or(defaults->max_position_embeddings));
  if (vocab->has_value()) meta.set(p + "vocab_size", **vocab);

  if (arch == "qwen3moe") SPILLWAY_TRY(import_moe_config(path, r, arch, meta));
  out.hybrid = hybrid;
  if (out.hybrid) SPILLWAY_TRY(import_hybrid_config(path, r, arch, *layers, key_length, rope_parameters, meta));
  if (const json* scaling = r.find("rope_scaling")) {
    SPILLWAY_TRY(import_rope_scaling(path, *scaling, "rope_scaling", arch, meta));
  } else if (rope_parameters) {
    SPILLWAY_TRY(import_rope_scaling(path, *rope_parameters, "rope_parameters", arch, meta));
  }
  return out;
}

}  // namespace spillway::engine
