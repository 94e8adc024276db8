// Stop strings over streamed text: matched across token boundaries, the matched text and
// everything after it excluded from the output, and text that could still become a stop
// string held back until it cannot.
//
// Text is pushed in pieces of whole UTF-8 sequences (StreamingDetokenizer output). A held
// back suffix always starts where a stop string starts, so released text stays whole UTF-8.
// Thread contract: one owner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spillway::scheduler {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(const std::vector<std::string>& stops);

  bool empty() const { return stops_.empty(); }

  // Appends text; returns the text that is now safe to emit. When a stop string completes
  // (the earliest one in the text), stopped() becomes true and the returned text ends
  // right before it; later pushes return nothing.
  std::string push(std::string_view text);
  // Releases the held-back text (the stream ended without completing a stop string).
  std::string flush();

  bool stopped() const { return stopped_; }
  // Bytes currently held back.
  size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace spillway::scheduler
