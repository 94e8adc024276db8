#include "server/observability/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace spillway::server {

namespace {

using json = nlohmann::ordered_json;

// Set by init_logging, which runs before any other thread starts (run_serve's first line).
LogFormat g_format = LogFormat::Text;
std::shared_ptr<spdlog::logger> g_logger;

std::shared_ptr<spdlog::logger> make_logger(LogFormat format) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("spillway", sink);
  logger->set_pattern(format == LogFormat::Json ? "%v" : "[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->flush_on(spdlog::level::info);
  logger->set_level(spdlog::level::info);
  return logger;
}

spdlog::logger& logger() {
  if (g_logger) return *g_logger;
  // Without init_logging (tests, tools): a text logger made once, whichever thread logs
  // first (a function-local static: thread-safe initialisation).
  static const std::shared_ptr<spdlog::logger> fallback = make_logger(LogFormat::Text);
  return *fallback;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", tm, static_cast<int>(ms));
}

std::string text_value(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.find_first_of(" \"=\n") == std::string::npos) return s;
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void emit(spdlog::level::level_enum level, std::string_view message, const json& fields) {
  spdlog::logger& log = logger();
  if (!log.should_log(level)) return;
  if (g_format == LogFormat::Json) {
    json line;
    line["time"] = utc_timestamp();
    line["level"] = spdlog::level::to_string_view(level).data();
    line["message"] = message;
    if (fields.is_object()) {
      for (auto& [k, v] : fields.items()) line[k] = v;
    }
    log.log(level, "{}", line.dump(-1, ' ', false, json::error_handler_t::replace));
    return;
  }
  std::string text(message);
  if (fields.is_object()) {
    for (auto& [k, v] : fields.items()) {
      text += ' ';
      text += k;
      text += '=';
      text += text_value(v);
    }
  }
  log.log(level, "{}", text);
}

}  // namespace

void init_logging(LogFormat format) {
  g_format = format;
  g_logger = make_logger(format);
}

void log_info(std::string_view message, const json& fields) {
  emit(spdlog::level::info, message, fields);
}
void log_warn(std::string_view message, const json& fields) {
  emit(spdlog::level::warn, message, fields);
}
void log_error(std::string_view message, const json& fields) {
  emit(spdlog::level::err, message, fields);
}

}  // namespace spillway::server
