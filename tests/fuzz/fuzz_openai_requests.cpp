// The OpenAI request parsers on arbitrary bodies: chat, completions, tokenize, detokenize.
// Every input must give a request or an ApiError with a 4xx status, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/requests/chat_request.h"
#include "api/requests/completion_request.h"
#include "api/requests/tokenize_request.h"

using namespace spillway::api;

template <class R>
void check(const ApiResult<R>& r) {
  if (!r && (r.error().status < 400 || r.error().status >= 500)) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  check(parse_chat_request(body));
  check(parse_completion_request(body));
  check(parse_tokenize_request(body));
  check(parse_detokenize_request(body));
  return 0;
}
