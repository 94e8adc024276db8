// The one place an ApiError becomes an HTTP response: the OpenAI error body
// (api::error_body), Retry-After on 429 / 503, x-should-retry: false on 500.
#pragma once

#include "api/api_error.h"
#include "server/http/http_exchange.h"

namespace spillway::server {

HttpResponse error_response(const api::ApiError& error);

}  // namespace spillway::server
