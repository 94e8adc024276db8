// The request-reading rules of the HTTP server that do not need a socket: Beast's parser under
// the configured header and body limits, then our checks on the parsed request
// (Transfer-Encoding, Host), each problem mapped to the response the client gets. The session
// (http_server.cpp) applies them to bytes as they arrive; read_request_bytes applies them to
// bytes already in memory (the HTTP fuzz target and tests). The Beast-typed pieces both share
// are in request_checks.h.
//
// Thread contract: free functions without state; any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "api/api_error.h"
#include "server/http/host_policy.h"
#include "server/http/http_exchange.h"

namespace spillway::server {

struct RequestReadLimits {
  size_t max_header_bytes = 64 * 1024;
  uint64_t max_body_bytes = 16ull << 20;
};

struct RequestReadResult {
  enum class Kind {
    Request,     // a whole request that passed every check: `request`
    Error,       // answer `error` and close the connection (the stream cannot be resynchronized)
    Incomplete,  // the bytes end inside the request
    Close,       // close without answering (nothing that deserves a response was sent)
  };
  Kind kind = Kind::Incomplete;
  HttpRequest request;
  api::ApiError error;
};

// Reads the first request of `wire` (one connection's bytes from its start).
RequestReadResult read_request_bytes(std::string_view wire, const RequestReadLimits& limits,
                                     const HostPolicy& hosts);

}  // namespace spillway::server
