// The Jinja interpreter through ChatTemplate: parse an arbitrary template and render it
// with a small conversation. Errors are values; loops are bounded by the interpreter, here
// with a hundredth of its default work budgets: under ASan + UBSan + coverage a template that
// spends the whole default budget renders in ~14 s (a libFuzzer timeout), and mutants of a
// heavy seed would otherwise crawl at ~100 inputs/s.
#include <cstdint>
#include <string>

#include "api/chat_template.h"
#include "jinja/interp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using spillway::api::ChatTemplate;
  auto parsed = ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!parsed) return 0;
  spillway::api::ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}])");
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.strftime_now = [](std::string_view) { return std::string("27 Nov 2026"); };
  spillway::jinja::RenderLimits limits;
  limits.max_work /= 100;
  limits.max_loop_iterations /= 100;
  limits.max_string_bytes /= 100;
  (void)parsed->render(inputs, limits);
  return 0;
}
