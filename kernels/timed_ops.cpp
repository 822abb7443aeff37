// The op profiler of kernels/timed_ops.h.
#include "kernels/timed_ops.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace dsv4 {

std::string weight_class(const std::string& tensor_name) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= tensor_name.size()) {
    const size_t dot = std::min(tensor_name.find('.', begin), tensor_name.size());
    parts.push_back(tensor_name.substr(begin, dot - begin));
    begin = dot + 1;
  }
  auto numeric = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (numeric(p) || (p == "layers" && i == 0) || (p == "weight" && i + 1 == parts.size()))
      continue;
    out += (out.empty() ? "" : ".") + p;
  }
  return out.empty() ? tensor_name : out;
}

std::vector<TimedOps::Row> TimedOps::rows() const {
  std::vector<Row> out;
  for (const auto& [op, s] : sums_) out.push_back(Row{op, s.calls, s.ms});
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  return out;
}

std::string TimedOps::table() const {
  const std::vector<Row> all = rows();
  double total = 0;
  size_t width = 2;  // "op"
  for (const Row& r : all) {
    total += r.total_ms;
    width = std::max(width, r.op.size());
  }
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  auto line = [&](const std::string& op, int64_t calls, double ms) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%10lld %12.3f %10.4f %6.1f%%\n", static_cast<long long>(calls),
                  ms, ms / steps, total > 0 ? 100.0 * ms / total : 0.0);
    return op + std::string(width - op.size() + 1, ' ') + buf;
  };
  std::string out = "op" + std::string(width - 1, ' ') +
                    "     calls     total ms    ms/step  share\n";
  int64_t calls = 0;
  for (const Row& r : all) {
    out += line(r.op, r.calls, r.total_ms);
    calls += r.calls;
  }
  out += line("total", calls, total);
  return out;
}

}  // namespace dsv4
