#include "server/router.h"

#include "server/routes.h"

#include <cctype>
#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "api/requests/chat_request.h"
#include "api/requests/completion_request.h"
#include "api/responses.h"
#include "api/sse.h"
#include "api/requests/tokenize_request.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat_prompt.h"
#include "server/http/error_response.h"
#include "server/generation_job.h"
#include "server/generation_params.h"
#include "server/observability/logging.h"
#include "server/observability/metrics.h"
#include "server/model_backend.h"
#include "server/random_id.h"
#include "server/structured_output.h"
#include "server/observability/request_log.h"

namespace spillway::server {

namespace {

using json = nlohmann::ordered_json;

constexpr int kRetryLoadingSeconds = 5;
constexpr int kRetryDrainingSeconds = 5;

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool needs_api_key(std::string_view path) {
  return path.substr(0, 4) == "/v1/" || path == "/v1" || path == "/tokenize" || path == "/detokenize";
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpResponse json_response(const json& body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = api::dump_json(body);
  return r;
}

}  // namespace

HttpResponse Router::transport_error(const api::ApiError& error, const std::string& path) {
  HttpResponse response = error_response(error);
  RequestRecord r;
  r.path = path;
  r.status = error.status;
  r.error = error.message;
  record_request(ctx_, r);
  return response;
}

void Router::respond(HttpExchange& exchange, HttpResponse response, const std::string& error) {
  RequestRecord r;
  r.method = exchange.request().method;
  r.path = exchange.request().path;
  r.status = response.status;
  r.error = error;
  // Counted before the response can reach the client, so a client that reads /metrics
  // right after its response sees the request.
  record_request(ctx_, r);
  exchange.respond(std::move(response));
}

void Router::respond_error(HttpExchange& exchange, const api::ApiError& error) {
  respond(exchange, error_response(error), error.message);
}

bool Router::authorized(const HttpRequest& request) const {
  const std::string& key = ctx_.options.api_key;
  if (key.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view header = request.authorization;
  if (header.size() < kBearer.size()) return false;
  std::string scheme(header.substr(0, kBearer.size()));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer ") return false;
  return constant_time_equal(header.substr(kBearer.size()), key);
}

void Router::handle(const std::shared_ptr<HttpExchange>& exchange) {
  try {
    route(exchange);
  } catch (const std::exception& e) {
    log_error("unexpected exception in a handler", {{"what", e.what()}});
    respond_error(*exchange, api::internal_error(std::string("Internal error: ") + e.what()));
  } catch (...) {
    respond_error(*exchange, api::internal_error("Internal error."));
  }
}

std::optional<api::ApiError> Router::check_model(const std::optional<std::string>& model) const {
  if (!model) return std::nullopt;
  if (*model == ctx_.model_id || (!ctx_.options.model.empty() && *model == ctx_.options.model)) {
    return std::nullopt;
  }
  return api::model_not_found(*model);
}

std::optional<api::ApiError> Router::check_ready() const {
  switch (ctx_.lifecycle.load()) {
    case Lifecycle::Ready:
      return std::nullopt;
    case Lifecycle::Loading:
      return api::unavailable("The model is loading; retry shortly.", kRetryLoadingSeconds);
    case Lifecycle::Draining:
      return api::unavailable("The server is shutting down.", kRetryDrainingSeconds);
    case Lifecycle::Failed:
      return api::unavailable("The model failed to load.", kRetryLoadingSeconds);
  }
  return std::nullopt;
}

void Router::route(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& req = exchange->request();
  const std::string& path = req.path;

  const Route* r = find_route(path);
  auto wrong_method = [&] {
    HttpResponse response = error_response(api::method_not_allowed(req.method, path));
    response.headers.emplace_back("Allow", std::string(r->method));
    respond(*exchange, std::move(response), "method not allowed");
  };
  // Probes and scrapes: no key, served in every state.
  if (r && r->probe) {
    if (req.method != r->method) return wrong_method();
    switch (r->id) {
      case RouteId::Live: return respond(*exchange, json_response({{"status", "ok"}}));
      case RouteId::Health: return health(*exchange);
      default: return metrics(*exchange);
    }
  }

  if (needs_api_key(path) && !authorized(req)) return respond_error(*exchange, api::invalid_api_key());
  if (ctx_.lifecycle.load() == Lifecycle::Draining) {
    return respond_error(*exchange, *check_ready());
  }
  if (!r) return respond_error(*exchange, api::path_not_found(req.method, path));
  if (req.method != r->method) return wrong_method();
  switch (r->id) {
    case RouteId::ChatCompletions: return chat_completions(exchange);
    case RouteId::Completions: return completions(exchange);
    case RouteId::Models: return models(*exchange, "");
    case RouteId::Model: return models(*exchange, percent_decode(path.substr(r->path.size())));
    case RouteId::Tokenize: return tokenize(*exchange);
    case RouteId::Detokenize: return detokenize(*exchange);
    case RouteId::Live:
    case RouteId::Health:
    case RouteId::Metrics: break;  // probes, above
  }
}

void Router::health(HttpExchange& exchange) {
  if (std::optional<api::ApiError> e = check_ready()) return respond_error(exchange, *e);
  respond(exchange, json_response({{"status", "ok"}}));
}

void Router::metrics(HttpExchange& exchange) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx_.metrics.render(ctx_.service.snapshot());
  respond(exchange, std::move(r));
}

void Router::models(HttpExchange& exchange, const std::string& id) {
  api::ModelCard card;
  card.id = ctx_.model_id;
  card.created = ctx_.model_created;
  if (ctx_.service.ready()) card.max_model_len = ctx_.service.max_context();
  if (id.empty()) return respond(exchange, json_response(api::render_model_list({&card, 1})));
  if (id != ctx_.model_id) return respond_error(exchange, api::model_not_found(id));
  respond(exchange, json_response(api::render_model(card)));
}

void Router::chat_completions(const std::shared_ptr<HttpExchange>& exchange) {
  const auto arrival = std::chrono::steady_clock::now();
  api::ApiResult<api::ChatRequest> parsed = api::parse_chat_request(exchange->request().body);
  if (!parsed) return respond_error(*exchange, parsed.error());
  api::ChatRequest& req = *parsed;
  if (auto e = check_model(req.model)) return respond_error(*exchange, *e);
  if (auto e = check_ready()) return respond_error(*exchange, *e);
  ModelBackend& service = ctx_.service;

  Result<std::string> text = service.chat_prompt().render(
      req.messages, req.tools, req.add_generation_prompt, req.chat_template_kwargs);
  if (!text) {
    return respond_error(*exchange, api::invalid_value("messages", "The chat template could not "
                                                                   "render these messages: " +
                                                                       text.error().message));
  }
  std::vector<int32_t> prompt = tokenize_prompt(service.tokenizer(), *text, /*add_special=*/true);
  // Tool calls may be written with special tokens ([TOOL_CALLS], <|python_tag|>).
  const bool tools = req.parse_tool_calls();
  api::ApiResult<scheduler::GenerationParams> params = make_generation_params(
      req.sampling, std::move(prompt), {req.logprobs, req.top_logprobs}, /*skip_special_default=*/!tools,
      {service.n_vocab(), service.max_context(), service.diffusion_model(), service.moe_experts_used()}, "messages");
  if (!params) return respond_error(*exchange, params.error());
  if (req.forced_tool_calls() || req.structured.active()) {
    GrammarResult g = req.forced_tool_calls() ? compile_tool_calls(req, tool_call_syntax(service.tokenizer()))
                                              : compile_structured_output(req.structured);
    if (!g) return respond_error(*exchange, g.error());
    params->grammar = std::move(*g);
    ctx_.metrics.count_constrained_request();
  }

  JobSpec spec;
  spec.kind = JobKind::Chat;
  spec.meta = {random_id("chatcmpl-"), unix_now(), req.model};
  spec.stream = req.sampling.stream;
  spec.include_usage = req.sampling.include_usage;
  spec.n = req.sampling.n;
  spec.logprobs = req.logprobs;
  if (tools) spec.tool_names = req.tool_names;
  spec.named_tool_choice = req.tool_choice == api::ToolChoice::Function;
  spec.arrival = arrival;
  std::vector<scheduler::GenerationParams> prompts;
  prompts.push_back(std::move(*params));
  GenerationJob::start(ctx_, exchange, std::move(spec), std::move(prompts));
}

void Router::completions(const std::shared_ptr<HttpExchange>& exchange) {
  const auto arrival = std::chrono::steady_clock::now();
  api::ApiResult<api::CompletionRequest> parsed = api::parse_completion_request(exchange->request().body);
  if (!parsed) return respond_error(*exchange, parsed.error());
  api::CompletionRequest& req = *parsed;
  if (auto e = check_model(req.model)) return respond_error(*exchange, *e);
  if (auto e = check_ready()) return respond_error(*exchange, *e);
  ModelBackend& service = ctx_.service;

  JobSpec spec;
  spec.kind = JobKind::Completion;
  spec.meta = {random_id("cmpl-"), unix_now(), req.model};
  spec.stream = req.sampling.stream;
  spec.include_usage = req.sampling.include_usage;
  spec.n = req.sampling.n;
  spec.logprobs = req.logprobs.has_value();
  spec.arrival = arrival;
  std::vector<scheduler::GenerationParams> prompts;
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  if (req.structured.active()) {
    GrammarResult g = compile_structured_output(req.structured);
    if (!g) return respond_error(*exchange, g.error());
    constraint = std::move(*g);
    ctx_.metrics.count_constrained_request();
  }
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    const api::CompletionPrompt& p = req.prompts[i];
    std::vector<int32_t> ids =
        p.text ? tokenize_prompt(service.tokenizer(), *p.text, /*add_special=*/true) : p.tokens;
    const std::string param = req.prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
    if (req.echo) {
      std::string echo = p.text ? *p.text
                                : service.tokenizer().decode(p.tokens, /*skip_special=*/false,
                                                             /*remove_leading_space=*/true);
      spec.echo_texts.push_back(std::move(echo));
    }
    const LogprobRequest lp{req.logprobs.has_value(), req.logprobs.value_or(0)};
    api::ApiResult<scheduler::GenerationParams> params = make_generation_params(
        req.sampling, std::move(ids), lp, /*skip_special_default=*/true,
        {service.n_vocab(), service.max_context(), service.diffusion_model(), service.moe_experts_used()}, param);
    if (!params) return respond_error(*exchange, params.error());
    params->grammar = constraint;
    prompts.push_back(std::move(*params));
  }
  GenerationJob::start(ctx_, exchange, std::move(spec), std::move(prompts));
}

void Router::tokenize(HttpExchange& exchange) {
  api::ApiResult<api::TokenizeRequest> parsed = api::parse_tokenize_request(exchange.request().body);
  if (!parsed) return respond_error(exchange, parsed.error());
  if (auto e = check_model(parsed->model)) return respond_error(exchange, *e);
  if (auto e = check_ready()) return respond_error(exchange, *e);
  const ModelBackend& service = ctx_.service;
  std::string text;
  if (parsed->prompt) {
    text = *parsed->prompt;
  } else {
    Result<std::string> rendered = service.chat_prompt().render(
        parsed->messages, parsed->tools, parsed->add_generation_prompt, parsed->chat_template_kwargs);
    if (!rendered) {
      return respond_error(exchange, api::invalid_value("messages", "The chat template could not "
                                                                    "render these messages: " +
                                                                        rendered.error().message));
    }
    text = std::move(*rendered);
  }
  const std::vector<int32_t> ids = tokenize_prompt(service.tokenizer(), text, parsed->add_special_tokens);
  std::vector<std::string> pieces;
  if (parsed->return_token_strs) {
    for (int32_t id : ids) pieces.push_back(service.tokenizer().token_bytes(id, true));
  }
  respond(exchange, json_response(api::render_tokenize_response(
                        ids, service.max_context(), parsed->return_token_strs ? &pieces : nullptr)));
}

void Router::detokenize(HttpExchange& exchange) {
  api::ApiResult<api::DetokenizeRequest> parsed = api::parse_detokenize_request(exchange.request().body);
  if (!parsed) return respond_error(exchange, parsed.error());
  if (auto e = check_model(parsed->model)) return respond_error(exchange, *e);
  if (auto e = check_ready()) return respond_error(exchange, *e);
  const ModelBackend& service = ctx_.service;
  for (size_t i = 0; i < parsed->tokens.size(); ++i) {
    if (parsed->tokens[i] >= service.n_vocab()) {
      return respond_error(exchange, api::invalid_value(fmt::format("tokens[{}]", i),
                                                        fmt::format("Invalid 'tokens[{}]': token id {} is out of range; this model's vocabulary has {} tokens.",
                                                                    i, parsed->tokens[i], service.n_vocab())));
    }
  }
  respond(exchange, json_response(api::render_detokenize_response(
                        service.tokenizer().decode(parsed->tokens, /*skip_special=*/false,
                                                   /*remove_leading_space=*/true))));
}

}  // namespace spillway::server
