#include "launcher/server_metrics.h"

#include <sstream>

namespace dsv4 {

void ServerMetrics::Histogram::observe(double v) {
  for (size_t i = 0; i < kBounds.size(); ++i)
    if (v <= kBounds[i]) {
      ++buckets[i];
      break;
    }
  ++count;
  sum += v;
}

std::string ServerMetrics::Histogram::render(const std::string& name, const std::string& help) const {
  std::ostringstream os;
  os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets[i];
    os << name << "_bucket{le=\"" << kBounds[i] << "\"} " << cumulative << "\n";
  }
  os << name << "_bucket{le=\"+Inf\"} " << count << "\n"
     << name << "_sum " << sum << "\n" << name << "_count " << count << "\n";
  return os.str();
}

void ServerMetrics::count_request(const std::string& outcome) {
  std::lock_guard lock(m_);
  ++requests_[outcome];
}

void ServerMetrics::count_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(m_);
  prompt_tokens_ += static_cast<uint64_t>(prompt);
  generated_tokens_ += static_cast<uint64_t>(generated);
}

void ServerMetrics::observe_ttft(double seconds) {
  std::lock_guard lock(m_);
  ttft_.observe(seconds);
}

void ServerMetrics::observe_tpot(double seconds) {
  std::lock_guard lock(m_);
  tpot_.observe(seconds);
}

void ServerMetrics::set_queue(int64_t waiting, int64_t running) {
  std::lock_guard lock(m_);
  waiting_ = waiting;
  running_ = running;
}

std::string ServerMetrics::exposition() const {
  std::lock_guard lock(m_);
  std::ostringstream os;
  os << "# HELP dsv4_requests_total Requests finished, by outcome.\n"
        "# TYPE dsv4_requests_total counter\n";
  for (const char* outcome : {"ok", "cancelled", "rejected", "failed"}) {
    const auto it = requests_.find(outcome);
    os << "dsv4_requests_total{outcome=\"" << outcome << "\"} "
       << (it == requests_.end() ? 0 : it->second) << "\n";
  }
  os << "# HELP dsv4_prompt_tokens_total Prompt tokens prefilled.\n"
        "# TYPE dsv4_prompt_tokens_total counter\n"
     << "dsv4_prompt_tokens_total " << prompt_tokens_ << "\n"
     << "# HELP dsv4_generation_tokens_total Tokens generated.\n"
        "# TYPE dsv4_generation_tokens_total counter\n"
     << "dsv4_generation_tokens_total " << generated_tokens_ << "\n"
     << "# HELP dsv4_queue_depth Requests waiting for the engine.\n"
        "# TYPE dsv4_queue_depth gauge\n"
     << "dsv4_queue_depth " << waiting_ << "\n"
     << "# HELP dsv4_requests_running Requests the engine is generating.\n"
        "# TYPE dsv4_requests_running gauge\n"
     << "dsv4_requests_running " << running_ << "\n"
     << ttft_.render("dsv4_time_to_first_token_seconds",
                     "Time from a request's arrival to its first generated token.")
     << tpot_.render("dsv4_time_per_output_token_seconds",
                     "Mean time per generated token after the first, per request.");
  return os.str();
}

}  // namespace dsv4
