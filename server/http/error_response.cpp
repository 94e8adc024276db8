#include "server/http/error_response.h"

#include "api/sse.h"

namespace spillway::server {

HttpResponse error_response(const api::ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = api::dump_json(api::error_body(error));
  if (error.retry_after_seconds && (error.status == 429 || error.status == 503)) {
    r.headers.emplace_back("Retry-After", std::to_string(*error.retry_after_seconds));
  }
  if (error.status == 500) r.headers.emplace_back("x-should-retry", "false");
  if (error.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace spillway::server
