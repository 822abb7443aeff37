// Stop strings over streamed text (issue 14): text is released as soon as it can no
// longer be the start of a stop string; when a stop string appears, the text before it
// is the last released and the stop string itself is never shown (OpenAI `stop`).
#pragma once
#include <string>
#include <vector>

namespace dsv4 {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds decoded text; returns the text that is now final. After a match stopped() is
  // true and later calls return "".
  std::string push(const std::string& text);
  // The held-back rest at the end of generation (none after a match).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // released text never contains a stop string; held_ may start one
  bool stopped_ = false;
};

}  // namespace dsv4
