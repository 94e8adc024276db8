// The MoBiLE field of /v1/completions and /v1/chat/completions (MoE models only): an
// optional `moe` object {little_experts: K | "auto" | "off", fallback_confidence: γ in
// [0, 1]} overriding the server's --moe-little-experts / --moe-fallback-confidence for this
// request. Unknown members and invalid values are 400s naming the field
// ("moe.little_experts"); whether the model has MoE layers, and K against its top-k, is the
// server's check.
#pragma once

#include <cstdint>
#include <optional>

#include "api/requests/json_fields.h"

namespace spillway::api {

struct MoeFields {
  static constexpr int32_t kOff = 0;
  static constexpr int32_t kAuto = -1;
  bool given = false;                        // the body has a `moe` object
  std::optional<int32_t> little_experts;     // kOff, kAuto or >= 1
  std::optional<double> fallback_confidence; // [0, 1]
};

void read_moe_fields(FieldReader& body, MoeFields& out);

}  // namespace spillway::api
