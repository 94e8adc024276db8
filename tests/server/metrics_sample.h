// What the metrics tests share (test_metrics, test_moe_metrics): reading one sample's value
// out of a rendered Prometheus text exposition (ServerMetrics::render).
#pragma once

#include <sstream>
#include <string>

namespace spillway::server::testing {

// The value of the sample line that starts with `series` (name{labels}) in `text`, or -1
// when there is none.
inline double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace spillway::server::testing
