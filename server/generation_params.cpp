#include "server/generation_params.h"

#include <fmt/format.h>

#include <random>

#include "engine/diffusion/params.h"

namespace spillway::server {

namespace {

api::ApiError token_out_of_range(std::string param, int32_t id, int32_t n_vocab) {
  return api::invalid_value(param, fmt::format("Invalid '{}': token id {} is out of range; this "
                                               "model's vocabulary has {} tokens.",
                                               param, id, n_vocab));
}

// The diffusion sampler parameters from the wire (diffusion models only).
api::ApiResult<engine::diffusion::DiffusionParams> diffusion_params(const api::SamplingFields& f) {
  namespace dd = engine::diffusion;
  const api::DiffusionFields& d = f.diffusion;
  dd::DiffusionParams p;
  p.steps = d.steps.value_or(0);  // 0: one token per step (the scheduler fills it in)
  if (d.block_length) {
    p.schedule = dd::Schedule::Block;
    p.block_length = *d.block_length;
    p.blocks_over_canvas = false;  // LLaDA's rule: blocks tile max_tokens
  } else {
    p.schedule = dd::Schedule::Timestep;
  }
  if (d.eps) p.eps = static_cast<float>(*d.eps);
  if (d.algorithm) {
    auto a = dd::parse_algorithm(*d.algorithm);
    if (!a) return api::invalid_value("diffusion.algorithm", a.error().message);
    p.algorithm = *a;
  }
  if (d.alg_temp) p.alg_temp = static_cast<float>(*d.alg_temp);
  p.block_cache = d.cache == "block";
  p.compact = d.cache == "compact";
  p.cache_chosen = d.cache.has_value();
  p.compact_refresh = d.compact_refresh.value_or(0);
  p.repeat_guard = d.repeat_guard.value_or(0);
  p.eos_tail_drop = d.eos_tail_drop.value_or(false);
  p.repair = d.repair.value_or(false);
  p.exact_top_k = d.exact_top_k.value_or(false);
  if (d.sampler == "turbo" || d.threshold) {
    // The seed's default two-stage rule: 0.95 for the first 8 steps of a block, then 0.80.
    p.threshold = static_cast<float>(d.threshold.value_or(0.95));
    p.threshold_low = static_cast<float>(d.threshold ? d.threshold_low.value_or(0.0) : 0.80);
    p.threshold_switch = d.threshold ? d.threshold_switch.value_or(0) : 8;
    if (p.algorithm == dd::Algorithm::Origin) {
      return api::invalid_value("diffusion.algorithm", "Invalid 'diffusion.algorithm': 'origin' cannot be used "
                                                       "with the turbo sampler.");
    }
  }
  p.temperature = static_cast<float>(f.temperature);
  p.top_k = f.top_k;
  p.top_p = f.top_p > 0.0 ? static_cast<float>(f.top_p) : 1e-9f;
  p.seed = f.seed ? static_cast<uint32_t>(*f.seed) : static_cast<uint32_t>(std::random_device{}());
  return p;
}

}  // namespace

api::ApiResult<scheduler::GenerationParams> make_generation_params(
    const api::SamplingFields& f, std::vector<int32_t> prompt, LogprobRequest logprobs,
    bool skip_special_default, const ModelLimits& limits, std::string_view prompt_param) {
  scheduler::GenerationParams p;
  if (prompt.empty()) {
    return api::invalid_value(prompt_param, fmt::format("Invalid '{}': the prompt is empty after "
                                                        "tokenization.",
                                                        prompt_param));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] >= limits.n_vocab) {
      return token_out_of_range(fmt::format("{}[{}]", prompt_param, i), prompt[i], limits.n_vocab);
    }
  }
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (!f.diffusion.given.empty() && !limits.diffusion) {
    return api::invalid_value(f.diffusion.given,
                              fmt::format("Invalid '{}': this model is autoregressive; diffusion fields apply to "
                                          "diffusion models (llada, dream) only.",
                                          f.diffusion.given));
  }
  if (f.moe.given) {  // MoBiLE override (api/requests/moe_fields.h)
    if (limits.moe_experts_used == 0) {
      return api::invalid_value("moe", "Invalid 'moe': this model has no MoE layers; 'moe' applies to "
                                       "mixture-of-experts models only.");
    }
    if (f.moe.little_experts && *f.moe.little_experts > limits.moe_experts_used) {
      return api::invalid_value("moe.little_experts",
                                fmt::format("Invalid 'moe.little_experts': {} is more than the model's {} "
                                            "experts per token.",
                                            *f.moe.little_experts, limits.moe_experts_used));
    }
    engine::MobileRequest m;
    if (f.moe.little_experts) {
      m.little_experts = *f.moe.little_experts == api::MoeFields::kAuto ? engine::kMobileAuto
                         : *f.moe.little_experts == api::MoeFields::kOff ? engine::kMobileOff
                                                                          : *f.moe.little_experts;
    }
    m.fallback_confidence = f.moe.fallback_confidence;
    p.moe = m;
  }
  if (limits.diffusion && (logprobs.logprobs || logprobs.top_logprobs > 0)) {
    return api::invalid_value("logprobs", "Invalid 'logprobs': a diffusion model does not report logprobs.");
  }
  if (f.max_tokens) {
    if (n_prompt + *f.max_tokens > limits.max_context) {
      api::ApiError e = api::context_length_exceeded(fmt::format(
          "This model's maximum context length is {} tokens. However, you requested {} tokens "
          "({} in the {}, {} for the completion). Please reduce the length of the {} or "
          "completion.",
          limits.max_context, n_prompt + *f.max_tokens, n_prompt, prompt_param, *f.max_tokens,
          prompt_param));
      e.param = std::string(prompt_param);
      return e;
    }
    p.max_tokens = *f.max_tokens;
  } else {
    if (n_prompt >= limits.max_context) {
      api::ApiError e = api::context_length_exceeded(fmt::format(
          "This model's maximum context length is {} tokens. However, your {} resulted in {} "
          "tokens. Please reduce the length of the {}.",
          limits.max_context, prompt_param, n_prompt, prompt_param));
      e.param = std::string(prompt_param);
      return e;
    }
    // A diffusion canvas must fit one step: the scheduler picks its default length.
    p.max_tokens = limits.diffusion ? -1 : static_cast<int32_t>(limits.max_context - n_prompt);
  }
  if (limits.diffusion) {
    auto d = diffusion_params(f);
    if (!d) return d.error();
    p.diffusion = *d;
  }
  if (p.max_tokens > 0 && f.min_tokens > p.max_tokens) {
    return api::invalid_value("min_tokens", fmt::format("Invalid 'min_tokens': {} is more than the "
                                                        "{} tokens that fit after the prompt.",
                                                        f.min_tokens, p.max_tokens));
  }
  p.prompt = std::move(prompt);

  engine::SamplingParams& s = p.sampling;
  s.temperature = static_cast<float>(f.temperature);
  // OpenAI accepts top_p = 0; the engine wants (0, 1]: keep only the most likely token.
  s.top_p = f.top_p > 0.0 ? static_cast<float>(f.top_p) : 1e-9f;
  s.top_k = f.top_k;
  s.min_p = static_cast<float>(f.min_p);
  s.repetition_penalty = static_cast<float>(f.repetition_penalty);
  s.presence_penalty = static_cast<float>(f.presence_penalty);
  s.frequency_penalty = static_cast<float>(f.frequency_penalty);
  for (const auto& [id, bias] : f.logit_bias) {
    if (id >= limits.n_vocab) {
      return token_out_of_range(fmt::format("logit_bias.{}", id), id, limits.n_vocab);
    }
    s.logit_bias.emplace_back(id, bias);
  }
  if (f.seed) s.seed = static_cast<uint64_t>(*f.seed);
  s.logprobs = logprobs.logprobs;
  s.top_logprobs = logprobs.top_logprobs;

  p.min_tokens = f.min_tokens;
  p.ignore_eos = f.ignore_eos;
  p.stop = f.stop;
  for (size_t i = 0; i < f.stop_token_ids.size(); ++i) {
    if (f.stop_token_ids[i] >= limits.n_vocab) {
      return token_out_of_range(fmt::format("stop_token_ids[{}]", i), f.stop_token_ids[i],
                                limits.n_vocab);
    }
  }
  p.stop_token_ids = f.stop_token_ids;
  p.n = f.n;
  p.skip_special_tokens = f.skip_special_tokens.value_or(skip_special_default);
  return p;
}

}  // namespace spillway::server
