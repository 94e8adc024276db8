// Which Host headers the server answers: the defence against DNS rebinding, where a web page
// on evil.example resolves its own name to 127.0.0.1 and drives a local, keyless server from
// the victim's browser. Such requests carry the attacker's name in Host.
//
// Policy (as Ollama's for loopback binds): a server listening on a loopback address answers
// only Hosts that are an IP literal, `localhost` or a `*.localhost` name, or a name given in
// --allowed-hosts; a server listening elsewhere (a container's 0.0.0.0, where Kubernetes
// sends service names) answers every Host unless --allowed-hosts is given. A port in the
// Host is ignored; a request without Host (HTTP/1.0) is answered (browsers always send one).
// An allowed name may start with "." to allow its subdomains. "*" allows every Host.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spillway::server {

struct HostPolicy {
  bool restrict_to_allowed = false;  // false: every Host is answered
  std::vector<std::string> allowed;  // lower-case names, ".suffix" for subdomains

  // The policy for a server listening on `listen_host` with the user's --allowed-hosts.
  static HostPolicy for_listener(std::string_view listen_host, std::vector<std::string> allowed_hosts);

  // `host_header`: the request's Host field as sent (may be empty, carry a port, be [v6]).
  bool allows(std::string_view host_header) const;
};

}  // namespace spillway::server
