// An op profiler for any backend (launcher flag --profile-ops): an Ops decorator
// (kernels/forwarding_ops.h) that, while active, brackets every op with synchronize()
// and accumulates wall time and call counts per op name. Linears (group linear of
// kernels/ops.def) are keyed by op and weight class ("linear_fp8 attn.wq_b"); memory
// management (group manage: alloc, prepare, synchronize) is forwarded untimed.
// The synchronizations change no result: the ops and their order are the inner backend's.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/forwarding_ops.h"

namespace dsv4 {

// The weight class of a tensor name: numeric components, a "layers" prefix and a final
// "weight" dropped ("layers.3.attn.wq_b.weight" -> "attn.wq_b").
std::string weight_class(const std::string& tensor_name);

class TimedOps : public OpDecorator<TimedOps> {
 public:
  struct Row {
    std::string op;       // op name, or "op weight_class" for linears
    int64_t calls = 0;
    double total_ms = 0;
  };

  explicit TimedOps(Ops& inner) : OpDecorator(inner) {}

  // Only ops issued while active are timed (the launcher times decode steps only).
  void set_active(bool on) { active_ = on; }
  bool active() const { return active_; }
  // One timed step ended (the per-step column of the table divides by this count).
  void count_step() { ++steps_; }
  int64_t steps() const { return steps_; }

  // Accumulated rows, largest total first (ties by name).
  std::vector<Row> rows() const;
  // The table: op, calls, total ms, ms per step, share of the timed total.
  std::string table() const;

 private:
  struct Sum {
    int64_t calls = 0;
    double ms = 0;
  };
  friend class OpDecorator<TimedOps>;
  // Every op but memory management: while active, timed between synchronizations.
  template <class O, class Run, class... A>
  decltype(auto) around(O, Run&& run, const A&... a) {
    if constexpr (O::group == OpGroup::manage) {
      return run();
    } else {
      if (!active_) return run();
      inner().synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      run();
      inner().synchronize();
      const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
      Sum& s = sums_[key(O{}, a...)];
      ++s.calls;
      s.ms += dt.count();
    }
  }
  // The op's row: its name, and for a linear the class of its weight (the first argument).
  template <class O, class... A>
  static std::string key(O, const A&... a) {
    std::string k(O::name);
    if constexpr (O::group == OpGroup::linear) k += ' ' + weight_class(first_weight_name(a...));
    return k;
  }
  static const std::string& weight_name(const TensorView& w) { return w.name; }
  static const std::string& weight_name(const Fp8Linear& w) { return w.weight.name; }
  template <class W, class... A>
  static const std::string& first_weight_name(const W& w, const A&...) {
    return weight_name(w);
  }

  bool active_ = true;
  int64_t steps_ = 0;
  std::map<std::string, Sum> sums_;
};

}  // namespace dsv4
