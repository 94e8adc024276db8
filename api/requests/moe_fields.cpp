#include "api/requests/moe_fields.h"

#include <fmt/format.h>

namespace spillway::api {

namespace {
constexpr int64_t kMaxExperts = 1 << 16;
}  // namespace

void read_moe_fields(FieldReader& body, MoeFields& out) {
  const nlohmann::ordered_json* object = body.object("moe");
  if (!object || !body.ok()) return;
  out.given = true;
  for (auto it = object->begin(); it != object->end(); ++it) {
    if (it.key() != "little_experts" && it.key() != "fallback_confidence") {
      body.fail(invalid_value("moe." + it.key(), fmt::format("Unknown field 'moe.{}' (known: little_experts, "
                                                             "fallback_confidence).",
                                                             it.key())));
      return;
    }
  }
  FieldReader m(*object, "moe");
  if (const nlohmann::ordered_json* v = m.find("little_experts"); v && v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto") {
      out.little_experts = MoeFields::kAuto;
    } else if (s == "off") {
      out.little_experts = MoeFields::kOff;
    } else {
      m.fail(invalid_value("moe.little_experts", fmt::format("Invalid 'moe.little_experts': '{}'. Expected a "
                                                             "positive integer, 'auto' or 'off'.",
                                                             s)));
    }
  } else if (auto k = m.integer("little_experts", 1, kMaxExperts)) {
    out.little_experts = static_cast<int32_t>(*k);
  }
  if (auto g = m.number("fallback_confidence", 0.0, 1.0)) out.fallback_confidence = *g;
  if (!m.ok()) body.fail(*m.error());
}

}  // namespace spillway::api
