#include "api/requests/diffusion_fields.h"

#include <array>
#include <span>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace spillway::api {

namespace {

constexpr int64_t kMaxSteps = int64_t{1} << 20;
constexpr std::array<std::string_view, 8> kAlgorithms = {
    "confidence", "low_confidence", "maskgit_plus", "entropy", "margin", "topk_margin", "random", "origin"};
constexpr std::array<std::string_view, 13> kMembers = {
    "steps",   "block_length", "algorithm",     "alg_temp",      "eps",    "sampler",     "threshold",
    "cache",   "repeat_guard", "compact_refresh", "eos_tail_drop", "repair", "exact_top_k"};

bool known(std::string_view name, std::span<const std::string_view> list) {
  for (std::string_view k : list) {
    if (k == name) return true;
  }
  return false;
}

void mark(DiffusionFields& out, std::string_view name) {
  if (out.given.empty()) out.given = name;
}

}  // namespace

void read_diffusion_fields(FieldReader& body, DiffusionFields& out) {
  // Aliases first; the object's members override them.
  if (body.has("steps")) mark(out, "steps");
  if (auto v = body.integer("steps", 1, kMaxSteps)) out.steps = static_cast<int32_t>(*v);
  if (body.has("block_length")) mark(out, "block_length");
  if (auto v = body.integer("block_length", 1, kMaxSteps)) out.block_length = static_cast<int32_t>(*v);
  if (body.has("remasking")) mark(out, "remasking");
  if (auto v = body.string("remasking")) {
    if (*v != "low_confidence" && *v != "random") {
      body.fail(invalid_value("remasking", fmt::format("Invalid 'remasking': '{}'. Expected 'low_confidence' or "
                                                       "'random'.", *v)));
    } else {
      out.algorithm = *v;
    }
  }
  const nlohmann::ordered_json* object = body.object("diffusion");
  if (!object || !body.ok()) return;
  mark(out, "diffusion");
  for (auto it = object->begin(); it != object->end(); ++it) {
    if (!known(it.key(), kMembers)) {
      body.fail(invalid_value("diffusion." + it.key(),
                              fmt::format("Unknown field 'diffusion.{}' (known: steps, block_length, algorithm, "
                                          "alg_temp, eps, sampler, threshold, cache, repeat_guard, compact_refresh, "
                                          "eos_tail_drop, repair, exact_top_k).", it.key())));
      return;
    }
  }
  FieldReader d(*object, "diffusion");
  if (auto v = d.integer("steps", 1, kMaxSteps)) out.steps = static_cast<int32_t>(*v);
  if (auto v = d.integer("block_length", 1, kMaxSteps)) out.block_length = static_cast<int32_t>(*v);
  if (auto v = d.string("algorithm")) {
    if (!known(*v, kAlgorithms)) {
      d.fail(invalid_value("diffusion.algorithm",
                           fmt::format("Invalid 'diffusion.algorithm': '{}'. Expected one of confidence, "
                                       "low_confidence, maskgit_plus, entropy, margin, topk_margin, random, "
                                       "origin.", *v)));
    } else {
      out.algorithm = *v;
    }
  }
  if (auto v = d.number("alg_temp", 0.0, 1e6)) out.alg_temp = *v;
  if (auto v = d.number("eps", 0.0, 1.0)) {
    if (*v <= 0.0 || *v >= 1.0) {
      d.fail(invalid_value("diffusion.eps", "Invalid 'diffusion.eps': it must be in (0, 1)."));
    } else {
      out.eps = *v;
    }
  }
  if (auto v = d.string("sampler")) {
    if (*v != "reference" && *v != "turbo") {
      d.fail(invalid_value("diffusion.sampler",
                           fmt::format("Invalid 'diffusion.sampler': '{}'. Expected 'reference' or 'turbo'.", *v)));
    } else {
      out.sampler = *v;
    }
  }
  if (const nlohmann::ordered_json* t = d.find("threshold"); t && d.ok()) {
    auto in_range = [](const nlohmann::ordered_json& x) {
      return x.is_number() && x.get<double>() > 0.0 && x.get<double>() <= 1.0;
    };
    if (in_range(*t)) {
      out.threshold = t->get<double>();
    } else if (t->is_array() && t->size() == 3 && in_range((*t)[0]) && in_range((*t)[1]) &&
               as_integer((*t)[2]).has_value() && *as_integer((*t)[2]) >= 0 && *as_integer((*t)[2]) <= kMaxSteps) {
      out.threshold = (*t)[0].get<double>();
      out.threshold_low = (*t)[1].get<double>();
      out.threshold_switch = static_cast<int32_t>(*as_integer((*t)[2]));
    } else {
      d.fail(invalid_value("diffusion.threshold",
                           "Invalid 'diffusion.threshold': expected a number in (0, 1] or [hi, lo, switch_step]."));
    }
    if (d.ok() && out.sampler == "reference") {
      d.fail(invalid_value("diffusion.threshold", "Invalid 'diffusion.threshold': the reference sampler has no "
                                                  "threshold (use \"sampler\": \"turbo\")."));
    }
  }
  if (auto v = d.string("cache")) {
    if (*v != "none" && *v != "block" && *v != "compact") {
      d.fail(invalid_value("diffusion.cache",
                           fmt::format("Invalid 'diffusion.cache': '{}'. Expected 'none', 'block' or 'compact'.", *v)));
    } else if (*v == "block" && !out.block_length) {
      d.fail(invalid_value("diffusion.cache", "Invalid 'diffusion.cache': 'block' needs diffusion.block_length."));
    } else {
      out.cache = *v;
    }
  }
  if (auto v = d.integer("compact_refresh", 0, kMaxSteps)) {
    if (out.cache != "compact") {
      d.fail(invalid_value("diffusion.compact_refresh",
                           "Invalid 'diffusion.compact_refresh': it needs \"cache\": \"compact\"."));
    } else {
      out.compact_refresh = static_cast<int32_t>(*v);
    }
  }
  if (const nlohmann::ordered_json* g = d.find("repeat_guard"); g && d.ok()) {
    if (g->is_boolean()) {
      out.repeat_guard = g->get<bool>() ? 16 : 0;
    } else if (auto v = d.integer("repeat_guard", 2, kMaxSteps)) {
      out.repeat_guard = static_cast<int32_t>(*v);
    }
  }
  for (auto [name, field] : {std::pair{"eos_tail_drop", &out.eos_tail_drop}, std::pair{"repair", &out.repair},
                              std::pair{"exact_top_k", &out.exact_top_k}}) {
    if (const nlohmann::ordered_json* v = d.find(name); v && d.ok()) {
      if (!v->is_boolean()) {
        const std::string param = fmt::format("diffusion.{}", name);
        d.fail(invalid_value(param, fmt::format("Invalid '{}': expected true or false.", param)));
      } else {
        *field = v->get<bool>();
      }
    }
  }
  if (!d.ok()) body.fail(*d.error());
}

}  // namespace spillway::api
