#include "server/observability/request_log.h"

#include "server/routes.h"

#include <cmath>

#include "server/observability/logging.h"
#include "server/observability/metrics.h"

namespace spillway::server {

namespace {
double round_ms(double ms) { return std::round(ms * 10.0) / 10.0; }
}  // namespace

void record_request(ServerContext& ctx, const RequestRecord& r) {
  ctx.metrics.count_request(r.path, r.status);
  // Probes and scrapes are counted, not logged: they would drown the request log.
  if (const Route* route = find_route(r.path); route && route->probe) return;
  nlohmann::ordered_json f;
  if (!r.id.empty()) f["id"] = r.id;
  if (!r.method.empty()) f["method"] = r.method;
  if (!r.path.empty()) f["endpoint"] = r.path;
  f["status"] = r.status;
  if (!r.finish_reason.empty() || r.prompt_tokens > 0) {
    f["prompt_tokens"] = r.prompt_tokens;
    f["cached_tokens"] = r.cached_tokens;
    f["completion_tokens"] = r.completion_tokens;
  }
  if (!r.finish_reason.empty()) f["finish_reason"] = r.finish_reason;
  if (r.queue_ms) f["queue_ms"] = round_ms(*r.queue_ms);
  if (r.ttft_ms) f["ttft_ms"] = round_ms(*r.ttft_ms);
  f["total_ms"] = round_ms(r.total_ms);
  if (!r.error.empty()) f["error"] = r.error;
  if (r.status >= 500 && r.status != 503) {
    log_error("request", f);
  } else {
    log_info("request", f);
  }
}

}  // namespace spillway::server
