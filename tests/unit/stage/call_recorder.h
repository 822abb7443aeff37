// An Ops decorator (kernels/forwarding_ops.h) that writes every call down as one line:
// the op's name and every argument (pointers as addresses, weights by tensor name and
// address, rope tables by id), not the data. Two runs whose lines are equal issued the
// same op calls with the same arguments: what a replayed CUDA graph needs (issue 12).
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/forwarding_ops.h"

namespace dsv4::test {

class CallRecorder final : public OpDecorator<CallRecorder> {
 public:
  explicit CallRecorder(Ops& inner) : OpDecorator(inner) {}
  bool enabled = false;
  std::vector<std::string> calls;

  // The step's key, then its ops one by one (nothing is captured beneath a decorator).
  void run_step(const StepKey& k, const std::function<void()>& body) override {
    log("run_step", k.owner, k.rows, k.buffers[0], k.buffers[1], k.buffers[2]);
    body();
  }

 private:
  friend class OpDecorator<CallRecorder>;
  // Every op of kernels/ops.def: its line, then the op.
  template <class O, class Run, class... A>
  decltype(auto) around(O, Run&& run, const A&... a) {
    log(O::name, a...);
    return run();
  }

  static void put(std::ostringstream& s, const TensorView& t) {
    s << t.name << '@' << static_cast<const void*>(t.data);
  }
  static void put(std::ostringstream& s, const RopeTable& t) { s << "rope#" << t.id; }
  // A weight bundle by the tensor that names it.
  static void put(std::ostringstream& s, const Fp8Linear& w) { put(s, w.weight); }
  static void put(std::ostringstream& s, const HcParams& p) { put(s, p.fn); }
  static void put(std::ostringstream& s, const HeadWeights& w) { put(s, w.hc_head_fn); }
  static void put(std::ostringstream& s, const CompressorWeights& c) { put(s, c.wkv); }
  static void put(std::ostringstream& s, const BlockWeights& b) { put(s, b.gate_weight); }
  static void put(std::ostringstream& s, const Numerics& n) {
    s << "numerics(" << static_cast<int>(n.kv_quant) << static_cast<int>(n.expert_arm)
      << static_cast<int>(n.dense_act) << static_cast<int>(n.indexer_quant) << ')';
  }
  template <class T>
  static void put(std::ostringstream& s, const T& v) {
    if constexpr (std::is_pointer_v<T>)
      s << static_cast<const void*>(v);
    else if constexpr (std::is_enum_v<T>)
      s << static_cast<int>(v);
    else
      s << v;
  }
  template <class... A>
  void log(std::string_view op, const A&... a) {
    if (!enabled) return;
    std::ostringstream s;
    s.precision(17);
    s << op;
    ((s << ' ', put(s, a)), ...);
    calls.push_back(s.str());
  }
};

}  // namespace dsv4::test
