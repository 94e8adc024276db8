#include "server/generation_job.h"

#include <fmt/format.h>

#include "api/logprobs.h"
#include "api/sse.h"
#include "api/text_encoding.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/http/error_response.h"
#include "server/observability/metrics.h"
#include "server/model_backend.h"
#include "server/random_id.h"
#include "server/observability/request_log.h"

namespace spillway::server {

namespace {

// The field a scheduler rejection names: its message starts with "field: " (e.g.
// "diffusion.block_length: ...", "max_tokens: ..."); nullopt for other messages.
std::optional<std::string> rejected_param(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  for (size_t i = 0; i < colon; ++i) {
    const char c = message[i];
    if (!((c >= 'a' && c <= 'z') || c == '_' || c == '.')) return std::nullopt;
  }
  return message.substr(0, colon);
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

const char* finish_label(std::optional<scheduler::FinishReason> reason, bool tool_calls) {
  if (!reason) return "cancelled";
  switch (*reason) {
    case scheduler::FinishReason::Stop: return tool_calls ? "tool_calls" : "stop";
    case scheduler::FinishReason::Length: return "length";
    case scheduler::FinishReason::Cancelled: return "cancelled";
    case scheduler::FinishReason::Error: return "error";
  }
  return "error";
}

}  // namespace

GenerationJob::GenerationJob(ServerContext& ctx, std::shared_ptr<HttpExchange> exchange, JobSpec spec)
    : ctx_(ctx), exchange_(std::move(exchange)), spec_(std::move(spec)) {}

void GenerationJob::start(ServerContext& ctx, std::shared_ptr<HttpExchange> exchange, JobSpec spec,
                          std::vector<scheduler::GenerationParams> prompts) {
  auto job = std::make_shared<GenerationJob>(ctx, exchange, std::move(spec));
  const size_t n_subs = prompts.size();
  job->subs_.resize(n_subs);
  job->choices_.resize(n_subs * static_cast<size_t>(job->spec_.n));
  for (size_t s = 0; s < n_subs; ++s) {
    for (int32_t c = 0; c < job->spec_.n; ++c) {
      const int32_t index = static_cast<int32_t>(s) * job->spec_.n + c;
      Choice& choice = job->choices_[static_cast<size_t>(index)];
      choice.index = index;
      if (job->spec_.stream && !job->spec_.tool_names.empty()) choice.filter.emplace(job->spec_.tool_names);
      if (!job->spec_.echo_texts.empty()) {
        choice.text_offset = api::code_point_count(job->spec_.echo_texts[s]);
      }
    }
  }

  ModelBackend& backend = ctx.service;
  for (size_t s = 0; s < n_subs; ++s) {
    auto sink = [job, s](scheduler::RequestUpdate&& update) {
      auto u = std::make_shared<scheduler::RequestUpdate>(std::move(update));
      job->exchange_->post([job, s, u] { job->on_update_safely(s, std::move(*u)); });
    };
    auto submitted = backend.submit(std::move(prompts[s]), std::move(sink));
    if (auto* rejection = std::get_if<scheduler::SubmitRejection>(&submitted)) {
      job->done_ = true;  // updates of the prompts already submitted are ignored
      for (size_t k = 0; k < s; ++k) backend.cancel(job->subs_[k].id);
      api::ApiError error;
      switch (rejection->kind) {
        case scheduler::SubmitError::QueueFull:
          error = api::overloaded(rejection->message, 1);
          break;
        case scheduler::SubmitError::ShuttingDown:
          error = api::unavailable(rejection->message, 5);
          break;
        case scheduler::SubmitError::Invalid:
          error = api::invalid_value(rejected_param(rejection->message).value_or(
                                         job->spec_.kind == JobKind::Chat ? "messages" : "prompt"),
                                     rejection->message);
          break;
      }
      job->record(error.status, error.message);  // before the client can see the response
      exchange->respond(error_response(error));
      return;
    }
    job->subs_[s].id = std::get<scheduler::RequestId>(submitted);
  }
  ++ctx.in_flight;
  // Weak: the exchange must not keep its job alive (the job holds the exchange).
  exchange->on_client_gone([weak = std::weak_ptr<GenerationJob>(job)] {
    if (auto j = weak.lock()) j->on_client_gone();
  });
  if (job->spec_.stream) {
    exchange->start_stream(ctx.sse_keepalive(), api::sse_comment("keepalive"));
    // Back-pressure: a client that stops reading pauses its sequences (they keep their KV)
    // instead of having its output decoded and buffered until the write timeout.
    if (ctx.options.max_unsent_stream_bytes > 0) {
      exchange->on_backpressure(ctx.options.max_unsent_stream_bytes,
                                [weak = std::weak_ptr<GenerationJob>(job)](bool paused) {
                                  if (auto j = weak.lock()) j->on_backpressure(paused);
                                });
    }
    if (job->spec_.kind == JobKind::Chat) {
      for (const Choice& c : job->choices_) {
        api::ChatDelta first;
        first.index = c.index;
        first.first = true;
        exchange->write(api::sse_event(api::render_chat_chunk(job->spec_.meta, {&first, 1},
                                                              job->spec_.include_usage)));
      }
    }
  }
}

void GenerationJob::on_update_safely(size_t sub, scheduler::RequestUpdate&& update) {
  try {
    on_update(sub, std::move(update));
  } catch (const std::exception& e) {
    fail(api::internal_error(std::string("Internal error while writing the response: ") + e.what()));
  } catch (...) {
    fail(api::internal_error("Internal error while writing the response."));
  }
}

// A bug: stop the engine work and end the response with a 500 (or an error event).
void GenerationJob::fail(const api::ApiError& error) noexcept {
  if (done_) return;
  done_ = true;
  --ctx_.in_flight;
  end_pause();
  try {
    for (const Sub& s : subs_) {
      if (!s.finished) ctx_.service.cancel(s.id);
    }
    record(error.status, error.message);  // before the client can see the response
    if (spec_.stream) {
      exchange_->write(api::sse_event(api::error_body(error)));
      exchange_->finish_stream();
    } else {
      exchange_->respond(error_response(error));
    }
  } catch (...) {
  }
}

void GenerationJob::on_client_gone() {
  if (done_) return;
  client_gone_ = true;
  end_pause();  // cancelled: the engine frees its sequences
  for (const Sub& s : subs_) {
    if (!s.finished) ctx_.service.cancel(s.id);
  }
}

void GenerationJob::on_backpressure(bool paused) {
  if (done_ || client_gone_ || paused == output_paused_) return;
  output_paused_ = paused;
  for (const Sub& s : subs_) {
    if (!s.finished) ctx_.service.set_output_paused(s.id, paused);
  }
  ctx_.metrics.output_paused(paused);
}

void GenerationJob::end_pause() {
  if (!output_paused_) return;
  output_paused_ = false;
  ctx_.metrics.output_paused(false);
}

std::vector<api::TokenLogprobs> GenerationJob::logprob_pieces(
    const std::vector<scheduler::GeneratedToken>& tokens) const {
  const engine::Tokenizer& tok = ctx_.service.tokenizer();
  std::vector<api::TokenLogprobs> out;
  out.reserve(tokens.size());
  for (const scheduler::GeneratedToken& t : tokens) {
    api::TokenLogprobs lp;
    lp.chosen = {tok.token_bytes(t.id, true), t.logprob};
    for (const engine::TokenLogprob& alt : t.top_logprobs) {
      lp.top.push_back({tok.token_bytes(alt.token, true), alt.logprob});
    }
    out.push_back(std::move(lp));
  }
  return out;
}

void GenerationJob::on_update(size_t sub_index, scheduler::RequestUpdate&& u) {
  if (done_) return;
  Sub& sub = subs_[sub_index];
  const Clock::time_point now = Clock::now();
  if (!sub.seen) {
    sub.seen = true;
    if (u.queue_seconds > 0.0 || u.completion_tokens > 0) {
      ctx_.metrics.observe_queue_time(u.queue_seconds);
      queue_seconds_ = std::max(queue_seconds_.value_or(0.0), u.queue_seconds);
    }
  }
  sub.prompt_tokens = u.prompt_tokens;
  sub.cached_tokens = u.cached_prompt_tokens;
  if (u.diffusion) {
    const scheduler::DiffusionUsage before = sub.diffusion.value_or(scheduler::DiffusionUsage{});
    ctx_.metrics.add_diffusion(u.diffusion->forwards - before.forwards, u.diffusion->committed - before.committed,
                               u.diffusion->rows_evaluated - before.rows_evaluated);
    ctx_.metrics.observe_diffusion(before, *u.diffusion);
    sub.diffusion = *u.diffusion;
  }
  const int32_t new_tokens = u.completion_tokens - sub.completion_tokens;
  sub.completion_tokens = u.completion_tokens;
  if (new_tokens > 0) {
    ctx_.metrics.add_generation_tokens(new_tokens);
    if (!first_token_at_) {
      first_token_at_ = now;
      ctx_.metrics.observe_time_to_first_token(ms_between(spec_.arrival, now) / 1000.0);
    } else if (sub.last_tokens_at) {
      ctx_.metrics.observe_inter_token_latency(ms_between(*sub.last_tokens_at, now) / 1000.0);
    }
    sub.last_tokens_at = now;
  }
  if (u.error) sub.error = u.error;

  for (const scheduler::ChoiceUpdate& cu : u.choices) {
    if (cu.index < 0 || cu.index >= spec_.n) continue;
    Choice& choice = choices_[sub_index * spec_.n + cu.index];
    if (cu.finish) choice.finish = cu.finish;
    if (spec_.stream) {
      stream_choice(choice, cu);
    } else {
      choice.text += cu.text;
      if (spec_.logprobs) choice.tokens.insert(choice.tokens.end(), cu.tokens.begin(), cu.tokens.end());
    }
  }
  if (u.finished) {
    sub.finished = true;
    for (int32_t c = 0; c < spec_.n; ++c) {
      Choice& choice = choices_[sub_index * spec_.n + c];
      if (!choice.finish) choice.finish = u.error ? scheduler::FinishReason::Error
                                                  : scheduler::FinishReason::Cancelled;
    }
    bool all = true;
    for (const Sub& s : subs_) all = all && s.finished;
    if (all) finish();
  }
}

// The wire finish reason of a choice that ended normally (tool calls parsed here for
// streams: `tail` gets the content the filter still held). nullopt: cancelled or failed.
std::optional<api::FinishReason> GenerationJob::wire_finish(Choice& choice, std::string& tail) {
  if (!choice.finish) return std::nullopt;
  switch (*choice.finish) {
    case scheduler::FinishReason::Stop:
    case scheduler::FinishReason::Length: {
      if (choice.filter) {
        api::AssistantOutput end = choice.filter->finish();
        tail = std::move(end.content);
        for (api::ToolCall& call : end.tool_calls) call.id = random_id("call_");
        choice.tool_calls = std::move(end.tool_calls);
      }
      if (!choice.tool_calls.empty() && !(spec_.named_tool_choice && *choice.finish == scheduler::FinishReason::Stop)) {
        return api::FinishReason::ToolCalls;
      }
      return *choice.finish == scheduler::FinishReason::Stop ? api::FinishReason::Stop
                                                             : api::FinishReason::Length;
    }
    default:
      return std::nullopt;
  }
}

void GenerationJob::stream_choice(Choice& choice, const scheduler::ChoiceUpdate& cu) {
  std::string content = choice.filter ? choice.filter->push(cu.text) : cu.text;
  std::optional<api::FinishReason> finish;
  if (cu.finish) {
    std::string tail;
    finish = wire_finish(choice, tail);
    content += tail;
  }
  const bool has_tokens = spec_.logprobs && !cu.tokens.empty();
  if (content.empty() && !has_tokens && !finish && choice.tool_calls.empty()) return;
  if (spec_.kind == JobKind::Chat) {
    api::ChatDelta d;
    d.index = choice.index;
    if (!content.empty()) d.content = std::move(content);
    d.tool_calls = choice.tool_calls;
    d.finish_reason = finish;
    if (has_tokens) d.logprobs = api::render_chat_logprobs(logprob_pieces(cu.tokens));
    exchange_->write(api::sse_event(api::render_chat_chunk(spec_.meta, {&d, 1}, spec_.include_usage)));
  } else {
    api::CompletionChoice c;
    c.index = choice.index;
    if (!spec_.echo_texts.empty() && !choice.echoed) {
      choice.echoed = true;
      c.text = spec_.echo_texts[choice.index / spec_.n];
    }
    c.text += content;
    c.finish_reason = finish;
    if (spec_.logprobs) {
      c.logprobs = api::render_completion_logprobs(logprob_pieces(cu.tokens), choice.text_offset);
    }
    exchange_->write(api::sse_event(api::render_completion_chunk(spec_.meta, {&c, 1}, spec_.include_usage)));
  }
}

api::Usage GenerationJob::usage() const {
  api::Usage u;
  for (const Sub& s : subs_) {
    u.prompt_tokens += s.prompt_tokens;
    u.completion_tokens += s.completion_tokens;
    u.cached_tokens += s.cached_tokens;
    if (s.diffusion) {
      if (!u.diffusion) u.diffusion = api::DiffusionUsage{};
      u.diffusion->forwards += s.diffusion->forwards;
      u.diffusion->committed += s.diffusion->committed;
      u.diffusion->rows_evaluated += s.diffusion->rows_evaluated;
    }
  }
  return u;
}

void GenerationJob::finish() {
  done_ = true;
  --ctx_.in_flight;
  end_pause();
  // A failed or cancelled choice fails the whole response.
  std::optional<api::ApiError> failure;
  for (const Sub& s : subs_) {
    if (s.error && s.error->rfind("structured output:", 0) == 0) {
      // A grammar's cap hit while generating (grammar/ matcher limits): the request's fault.
      api::ApiError cap_hit;
      cap_hit.status = 400;
      cap_hit.message = *s.error;
      failure = std::move(cap_hit);
    } else if (s.error) {
      failure = api::internal_error("The engine failed: " + *s.error);
    }
  }
  if (!failure) {
    for (const Choice& c : choices_) {
      if (c.finish == scheduler::FinishReason::Error) {
        failure = api::internal_error("The engine failed while generating.");
      } else if (c.finish == scheduler::FinishReason::Cancelled && !failure) {
        failure = client_gone_ ? api::unavailable("The client disconnected; the request was cancelled.", 1)
                               : api::unavailable("The request was cancelled: the server is shutting down.", 5);
      }
    }
  }
  if (spec_.stream) {
    finish_stream(failure);
  } else {
    respond_whole(failure);
  }
}

// Each ending records the request (metrics, log line) before the client can see the end.
void GenerationJob::finish_stream(const std::optional<api::ApiError>& failure) {
  record(client_gone_ ? 499 : 200, failure ? failure->message : "");
  if (failure) {
    exchange_->write(api::sse_event(api::error_body(*failure)));
  } else {
    if (spec_.include_usage) {
      json chunk = spec_.kind == JobKind::Chat ? api::render_chat_usage_chunk(spec_.meta, usage())
                                               : api::render_completion_usage_chunk(spec_.meta, usage());
      exchange_->write(api::sse_event(chunk));
    }
    exchange_->write(api::sse_done());
  }
  exchange_->finish_stream();
}

void GenerationJob::respond_whole(const std::optional<api::ApiError>& failure) {
  if (failure) {
    record(client_gone_ ? 499 : failure->status, failure->message);
    exchange_->respond(error_response(*failure));
    return;
  }
  HttpResponse response;
  if (spec_.kind == JobKind::Chat) {
    std::vector<api::ChatChoice> out;
    for (Choice& c : choices_) {
      api::ChatChoice cc;
      cc.index = c.index;
      if (!spec_.tool_names.empty()) {
        api::AssistantOutput parsed = api::parse_tool_calls(c.text, spec_.tool_names);
        for (api::ToolCall& call : parsed.tool_calls) call.id = random_id("call_");
        c.tool_calls = std::move(parsed.tool_calls);
        cc.content = std::move(parsed.content);
      } else {
        cc.content = std::move(c.text);
      }
      std::string unused;
      cc.finish_reason = wire_finish(c, unused).value_or(api::FinishReason::Stop);
      cc.tool_calls = c.tool_calls;
      if (spec_.logprobs) cc.logprobs = api::render_chat_logprobs(logprob_pieces(c.tokens));
      out.push_back(std::move(cc));
    }
    response.body = api::dump_json(api::render_chat_completion(spec_.meta, out, usage()));
  } else {
    std::vector<api::CompletionChoice> out;
    for (Choice& c : choices_) {
      api::CompletionChoice cc;
      cc.index = c.index;
      if (!spec_.echo_texts.empty()) cc.text = spec_.echo_texts[c.index / spec_.n];
      cc.text += c.text;
      std::string unused;
      cc.finish_reason = wire_finish(c, unused);
      if (spec_.logprobs) {
        cc.logprobs = api::render_completion_logprobs(logprob_pieces(c.tokens), c.text_offset);
      }
      out.push_back(std::move(cc));
    }
    response.body = api::dump_json(api::render_completion(spec_.meta, out, usage()));
  }
  record(client_gone_ ? 499 : 200, "");
  exchange_->respond(std::move(response));
}

void GenerationJob::record(int status, const std::string& error) {
  const Clock::time_point now = Clock::now();
  RequestRecord r;
  r.id = spec_.meta.id;
  r.method = exchange_->request().method;
  r.path = exchange_->request().path;
  r.status = status;
  const api::Usage u = usage();
  r.prompt_tokens = u.prompt_tokens;
  r.completion_tokens = u.completion_tokens;
  r.cached_tokens = u.cached_tokens;
  if (queue_seconds_) r.queue_ms = *queue_seconds_ * 1000.0;
  if (first_token_at_) r.ttft_ms = ms_between(spec_.arrival, *first_token_at_);
  r.total_ms = ms_between(spec_.arrival, now);
  r.error = error;
  if (done_ && !subs_.empty() && subs_.front().seen) {
    ctx_.metrics.observe_e2e_latency(r.total_ms / 1000.0);
    ctx_.metrics.add_prompt_tokens(u.prompt_tokens);
    std::string reasons;
    for (const Choice& c : choices_) {
      const char* label = finish_label(c.finish, !c.tool_calls.empty());
      ctx_.metrics.count_finished(label);
      if (reasons.find(label) == std::string::npos) reasons += reasons.empty() ? label : fmt::format(",{}", label);
    }
    r.finish_reason = reasons;
  }
  record_request(ctx_, r);
}

}  // namespace spillway::server
