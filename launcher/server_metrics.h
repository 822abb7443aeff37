// The server's Prometheus metrics (issue 14; text exposition format 0.0.4): requests by
// outcome, prompt and generated tokens, queue depth, running requests, and histograms of
// the time to first token and the time per output token. Thread-safe.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace dsv4 {

class ServerMetrics {
 public:
  // outcome: ok | cancelled | rejected (4xx) | failed
  void count_request(const std::string& outcome);
  void count_tokens(int64_t prompt, int64_t generated);
  void observe_ttft(double seconds);
  void observe_tpot(double seconds);
  void set_queue(int64_t waiting, int64_t running);
  std::string exposition() const;

 private:
  struct Histogram {
    static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,   0.25,   0.5,   1,    2.5,   10};
    std::array<uint64_t, 12> buckets{};  // cumulative at render time, per bucket here
    uint64_t count = 0;
    double sum = 0;
    void observe(double v);
    std::string render(const std::string& name, const std::string& help) const;
  };
  mutable std::mutex m_;
  std::map<std::string, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  int64_t waiting_ = 0, running_ = 0;
  Histogram ttft_, tpot_;
};

}  // namespace dsv4
