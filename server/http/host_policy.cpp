#include "server/http/host_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace spillway::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_ip_literal(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

bool is_loopback_listener(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char v4[4];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, host.c_str(), v6) == 1) {
    static constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::equal(v6, v6 + 16, kLoopback);
  }
  return false;
}

// "name", "name:port", "[v6]", "[v6]:port" -> the name (lower case), or "" when malformed.
std::string host_name(std::string_view header) {
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) header.remove_suffix(1);
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) header.remove_prefix(1);
  if (!header.empty() && header.front() == '[') {
    const size_t close = header.find(']');
    if (close == std::string_view::npos) return "";
    return lower(header.substr(1, close - 1));
  }
  const size_t colon = header.rfind(':');
  if (colon != std::string_view::npos) header = header.substr(0, colon);
  std::string name = lower(header);
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  return name;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

HostPolicy HostPolicy::for_listener(std::string_view listen_host, std::vector<std::string> allowed_hosts) {
  HostPolicy p;
  for (std::string& a : allowed_hosts) {
    if (a == "*") return HostPolicy{};
    if (!a.empty()) p.allowed.push_back(lower(a));
  }
  p.restrict_to_allowed = !p.allowed.empty() || is_loopback_listener(std::string(listen_host));
  return p;
}

bool HostPolicy::allows(std::string_view host_header) const {
  if (!restrict_to_allowed) return true;
  if (host_header.find_first_not_of(" \t") == std::string_view::npos) return true;  // HTTP/1.0: no Host
  const std::string name = host_name(host_header);
  if (name.empty()) return false;
  if (is_ip_literal(name) || name == "localhost" || ends_with(name, ".localhost")) return true;
  for (const std::string& a : allowed) {
    if (a == name) return true;
    if (a.front() == '.' && (ends_with(name, a) || name == a.substr(1))) return true;
  }
  return false;
}

}  // namespace spillway::server
