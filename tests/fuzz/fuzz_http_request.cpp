// The HTTP request reader (server/http/request_reader.h) on arbitrary bytes: Beast's parser
// under the server's limits, then the Transfer-Encoding and Host checks. Every input ends as
// a request, an error response, "incomplete" or a silent close — never a crash. The first
// byte picks the Host policy (loopback listener or any) and small or default limits.
#include <cstdint>
#include <string_view>

#include "server/http/request_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spillway::server;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  RequestReadLimits limits;
  if (mode & 2) {
    limits.max_header_bytes = 256;
    limits.max_body_bytes = 64;
  }
  const HostPolicy hosts = HostPolicy::for_listener((mode & 1) ? "127.0.0.1" : "0.0.0.0", {});
  const std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
  const RequestReadResult r = read_request_bytes(wire, limits, hosts);
  if (r.kind == RequestReadResult::Kind::Request && r.request.body.size() > limits.max_body_bytes) __builtin_trap();
  if (r.kind == RequestReadResult::Kind::Error && (r.error.status < 400 || r.error.status > 599)) __builtin_trap();
  return 0;
}
