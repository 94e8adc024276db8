// Progress of long work a person waits for (building the demo model, reading weights).
// On a terminal (stderr is a TTY and logs are text) one line is redrawn in place:
// "building the demo model  12/40 tensors  30%". Otherwise (a file, a pipe, a container
// log, --log-format json) it is plain log lines: the start, every 25%, and the end, so
// logs stay greppable and small. Not thread-safe: one reporter per piece of work, updated
// by the thread doing it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "server/serve_options.h"

namespace spillway::server {

class ProgressReporter {
 public:
  // unit: what is counted ("tensors", "bytes"); bytes are shown in MiB.
  ProgressReporter(std::string what, std::string unit, bool interactive);
  ~ProgressReporter();

  // done of total; done == total finishes the line.
  void update(int64_t done, int64_t total);

  // Interactive when stderr is a terminal and the log format is text.
  static bool interactive_for(LogFormat format);

 private:
  std::string format_count(int64_t n) const;

  std::string what_;
  std::string unit_;
  bool interactive_;
  bool finished_ = false;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

// The callback engine::set_up_residency takes (an engine::WeightLoadProgress) that reports
// reading the resident weights on `reporter`, for models of 256 MiB and more (smaller ones
// load in a blink). `reporter` must outlive the callback's use.
std::function<void(int64_t done_bytes, int64_t total_bytes)> resident_weights_progress(ProgressReporter& reporter);

}  // namespace spillway::server
