// What the request-field tests share (test_diffusion_fields, test_moe_fields): a minimal
// /v1/completions body with extra members, parsed; and the check that such a body is a 400
// whose `param` names the offending field.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/requests/completion_request.h"

namespace spillway::api::testing {

// {"model": "m", "prompt": "p"} with `extra`'s members added (or replacing those two),
// through parse_completion_request.
inline ApiResult<CompletionRequest> parse(const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json body = {{"model", "m"}, {"prompt", "p"}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return parse_completion_request(body.dump());
}

// The body with `extra` is refused with status 400 and error.param == `param`.
inline void expect_400(const nlohmann::ordered_json& extra, const std::string& param) {
  auto r = parse(extra);
  ASSERT_FALSE(r.ok()) << "expected an error for " << extra.dump();
  EXPECT_EQ(r.error().status, 400);
  ASSERT_TRUE(r.error().param.has_value()) << r.error().message;
  EXPECT_EQ(*r.error().param, param) << r.error().message;
}

}  // namespace spillway::api::testing
