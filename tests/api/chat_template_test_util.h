// Helpers shared by the chat-template tests.
#pragma once

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "api/chat_template.h"
#include "support/paths.h"

namespace spillway::api::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string chat_templates_dir() { return spillway::test_paths::testdata() + "/chat_templates/"; }

// The clock of the golden renders: 2024-07-26 12:00:00 (a Friday).
inline std::string fixed_strftime(std::string_view format) {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), std::string(format).c_str(), &tm);
  return std::string(buf, n);
}

// Renders source with the given messages and nothing else set; "ERROR: ..." on failure.
inline std::string render_or_error(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) return "ERROR: " + tmpl.error().message;
  ChatTemplateInputs in;
  if (vars.contains("messages")) in.messages = vars["messages"];
  if (vars.contains("tools")) in.tools = vars["tools"];
  if (vars.contains("add_generation_prompt")) in.add_generation_prompt = vars["add_generation_prompt"].get<bool>();
  if (vars.contains("bos_token")) in.bos_token = vars["bos_token"].get<std::string>();
  if (vars.contains("eos_token")) in.eos_token = vars["eos_token"].get<std::string>();
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (auto it = vars.begin(); it != vars.end(); ++it) {
    const std::string& k = it.key();
    if (k != "messages" && k != "tools" && k != "add_generation_prompt" && k != "bos_token" && k != "eos_token") {
      extra[k] = it.value();
    }
  }
  in.extra = extra;
  in.strftime_now = fixed_strftime;
  auto out = tmpl->render(in);
  if (!out.ok()) return "ERROR: " + out.error().message;
  return *out;
}

}  // namespace spillway::api::testing
