#include "bench/knockout.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "bench/timing.h"
#include "kernels/step_knockout.h"

namespace dsv4 {

namespace {

// Re-enables the kernel when the measurement ends, however it ends.
class KernelOff {
 public:
  KernelOff(Ops& ops, const std::string& name) : ops_(ops), name_(name) { set_step_kernel_enabled(ops_, name_, false); }
  ~KernelOff() {
    try {
      set_step_kernel_enabled(ops_, name_, true);
    } catch (...) {  // a destructor does not throw; the graph is dropped with the backend
    }
  }
  KernelOff(const KernelOff&) = delete;
  KernelOff& operator=(const KernelOff&) = delete;

 private:
  Ops& ops_;
  std::string name_;
};

}  // namespace

Knockout knock_out_kernels(Ops& ops, int warmup, int steps, const std::vector<std::string>& skip,
                           const std::function<void()>& refill, const std::function<void()>& step) {
  auto timed = [&](const std::string* off) {
    refill();
    for (int i = 0; i < std::max(warmup, 2); ++i) step();  // >= 2: a moved memory's warm-up and capture
    std::optional<KernelOff> k;
    if (off) k.emplace(ops, *off);
    return median(time_steps(0, steps, step));
  };
  Knockout out;
  out.step_ms = timed(nullptr);
  const std::vector<StepKernel> kernels = step_graph_kernels(ops);
  if (kernels.empty())
    throw Error(cat("--knockout: backend ", ops.name(), " holds no step graph (it needs the cuda backend with "
                    "CUDA graphs on)"));
  for (const StepKernel& k : kernels) {
    if (std::find(skip.begin(), skip.end(), k.name) != skip.end()) continue;
    // The name goes out before the measurement and the figures after it, so a kernel whose
    // missing outputs make a later one fault (a sticky error that ends the process) is the
    // line without figures; the lines with figures survive such an end (bench/README.md).
    std::fprintf(stderr, "knockout: %s (%d nodes) ... ", k.name.c_str(), k.nodes);
    std::fflush(stderr);
    const double ms = timed(&k.name);
    std::fprintf(stderr, "%.3f ms, saved %.3f ms\n", ms, out.step_ms - ms);
    out.rows.push_back({k.name, k.nodes, ms, out.step_ms - ms});
  }
  out.step_after_ms = timed(nullptr);
  std::sort(out.rows.begin(), out.rows.end(),
            [](const KnockoutRow& a, const KnockoutRow& b) { return a.saved_ms > b.saved_ms; });
  return out;
}

void print_knockout(const Knockout& k, int64_t context) {
  std::printf("\nknockout at context %lld: the plain step %.3f ms before, %.3f ms after; each kernel's nodes "
              "disabled in the step graph (outputs wrong: timing only):\n",
              static_cast<long long>(context), k.step_ms, k.step_after_ms);
  std::printf("%-44s %6s %10s %10s\n", "kernel", "nodes", "ms/step", "saved ms");
  for (const KnockoutRow& r : k.rows)
    std::printf("%-44s %6d %10.3f %10.3f\n", r.kernel.c_str(), r.nodes, r.ms, r.saved_ms);
}

nlohmann::ordered_json knockout_json(const Knockout& k, int64_t context) {
  nlohmann::ordered_json j;
  j["context"] = context;
  j["step_ms"] = k.step_ms;
  j["step_after_ms"] = k.step_after_ms;
  j["kernels"] = nlohmann::ordered_json::array();
  for (const KnockoutRow& r : k.rows)
    j["kernels"].push_back({{"kernel", r.kernel}, {"nodes", r.nodes}, {"ms_per_step", r.ms}, {"saved_ms", r.saved_ms}});
  return j;
}

}  // namespace dsv4
