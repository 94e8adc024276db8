#include "scheduler/stop_strings.h"

#include <algorithm>

namespace spillway::scheduler {

StopStringMatcher::StopStringMatcher(const std::vector<std::string>& stops) {
  for (const std::string& s : stops) {
    if (!s.empty()) stops_.push_back(s);
  }
}

std::string StopStringMatcher::push(std::string_view text) {
  if (stopped_) return {};
  if (stops_.empty()) return std::string(text);
  pending_.append(text);

  // A stop string completed? The held text contained none, so a match ends in `text`;
  // take the one that starts earliest.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    first = std::min(first, pending_.find(stop));
  }
  if (first != std::string::npos) {
    std::string out = pending_.substr(0, first);
    pending_.clear();
    stopped_ = true;
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t longest_stop = 0;
  for (const std::string& stop : stops_) longest_stop = std::max(longest_stop, stop.size());
  size_t keep_from = pending_.size();
  const size_t earliest = pending_.size() > longest_stop - 1 ? pending_.size() - (longest_stop - 1) : 0;
  for (size_t k = earliest; k < pending_.size(); ++k) {
    const std::string_view suffix = std::string_view(pending_).substr(k);
    const bool could_start_stop = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) {
      return s.size() > suffix.size() && std::string_view(s).substr(0, suffix.size()) == suffix;
    });
    if (could_start_stop) {
      keep_from = k;
      break;
    }
  }
  std::string out = pending_.substr(0, keep_from);
  pending_.erase(0, keep_from);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace spillway::scheduler
