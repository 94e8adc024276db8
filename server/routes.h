// The HTTP routes of API.md in one table: the router dispatches on it, the metrics label
// requests with it, the request log skips the probes it marks. A new endpoint is one row
// here and one case in Router::route.
#pragma once

#include <string_view>

namespace spillway::server {

enum class RouteId { Live, Health, Metrics, ChatCompletions, Completions, Models, Model, Tokenize, Detokenize };

struct Route {
  RouteId id;
  std::string_view path;    // the exact path, or the prefix of the paths it serves
  bool prefix;              // path is a prefix ("/v1/models/" + id)
  std::string_view method;  // the one method it answers (others get 405 with Allow)
  std::string_view label;   // the `endpoint` label of the request metrics
  bool probe;               // no API key, served in every lifecycle state, not logged
};

inline constexpr Route kRoutes[] = {
    {RouteId::Live, "/live", false, "GET", "/live", true},
    {RouteId::Health, "/health", false, "GET", "/health", true},
    {RouteId::Metrics, "/metrics", false, "GET", "/metrics", true},
    {RouteId::ChatCompletions, "/v1/chat/completions", false, "POST", "/v1/chat/completions", false},
    {RouteId::Completions, "/v1/completions", false, "POST", "/v1/completions", false},
    {RouteId::Models, "/v1/models", false, "GET", "/v1/models", false},
    {RouteId::Model, "/v1/models/", true, "GET", "/v1/models/{id}", false},
    {RouteId::Tokenize, "/tokenize", false, "POST", "/tokenize", false},
    {RouteId::Detokenize, "/detokenize", false, "POST", "/detokenize", false},
};

// The route serving `path`, or nullptr.
inline const Route* find_route(std::string_view path) {
  for (const Route& r : kRoutes) {
    if (r.prefix ? path.substr(0, r.path.size()) == r.path : path == r.path) return &r;
  }
  return nullptr;
}

}  // namespace spillway::server
