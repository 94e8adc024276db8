#include "server/observability/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "server/observability/logging.h"

namespace spillway::server {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
}  // namespace

ProgressReporter::ProgressReporter(std::string what, std::string unit, bool interactive)
    : what_(std::move(what)), unit_(std::move(unit)), interactive_(interactive), start_(Clock::now()) {}

ProgressReporter::~ProgressReporter() {
  if (interactive_ && !finished_ && last_draw_ != Clock::time_point{}) std::fputs("\n", stderr);
}

bool ProgressReporter::interactive_for(LogFormat format) {
  return format == LogFormat::Text && isatty(STDERR_FILENO) == 1;
}

std::string ProgressReporter::format_count(int64_t n) const {
  if (unit_ == "bytes") return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  return fmt::format("{} {}", n, unit_);
}

void ProgressReporter::update(int64_t done, int64_t total) {
  if (finished_ || total <= 0) return;
  const bool last = done >= total;
  const int percent = static_cast<int>(done * 100 / total);
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  if (interactive_) {
    const auto now = Clock::now();
    if (!last && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    const int width = 24;
    const int filled = percent * width / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%%  %s / %s  %.1fs%s", what_.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), percent,
                 format_count(done).c_str(), format_count(total).c_str(), seconds, last ? "\n" : "");
    std::fflush(stderr);
  } else {
    const int quarter = last ? 4 : percent / 25;
    if (quarter == last_quarter_) return;
    last_quarter_ = quarter;
    log_info(what_, {{"done", done}, {"total", total}, {"unit", unit_}, {"percent", percent},
                     {"seconds", seconds}});
  }
  finished_ = last;
}

std::function<void(int64_t, int64_t)> resident_weights_progress(ProgressReporter& reporter) {
  return [&reporter](int64_t done, int64_t total) {
    constexpr int64_t kWorthReporting = int64_t{256} << 20;
    if (total >= kWorthReporting) reporter.update(done, total);
  };
}

}  // namespace spillway::server
