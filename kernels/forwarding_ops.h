// Ops decorators, derived from the op list (kernels/ops.def) so that none of them lists
// the ops (issue 12: the list is declared once).
//
// OpDecorator<Self> implements every op of the list as one call of Self's hook
//   self.around(OpTag<"name">{}, run, args...)
// where run() issues the op on the inner backend and returns its result and args are the
// op's arguments, typed as the op declares them. A decorator writes its behaviour once,
// in around(); what it does differently for one op is an overload, or an if constexpr,
// on that op's tag, which also carries the op's group (kernels/ops.def). Decorators:
// ForwardingOps (below), TimedOps (kernels/timed_ops.h), TracingOps
// (tests/gpu/tracing_ops.h), CallRecorder (tests/unit/stage/call_recorder.h).
//
// Why a list file and a template hook: C++ generates no virtual functions from a type
// list, so the list is an X-macro; kept in its own file (not a multi-line #define) its
// entries carry ordinary comments and a compile error in one points at its own line. The
// hook is a CRTP template, not a virtual taking erased arguments, so a decorator sees
// each argument with its type (the tracer sizes an output, the timer names a weight)
// and an op treated specially is an ordinary overload, checked by the compiler.
//
// A decorated backend captures no step graph (run_step runs the body op by op).
#pragma once
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <functional>
#include <string_view>

#include "kernels/ops.h"

namespace dsv4 {

// The group column of kernels/ops.def.
enum class OpGroup { manage, work, linear };

// An op's name as a template argument: OpTag<"rmsnorm">.
template <size_t N>
struct OpName {
  char chars[N]{};
  constexpr OpName(const char (&s)[N]) { std::copy_n(s, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

namespace detail {
struct ListedOp {
  bool listed = false;
  OpGroup group = OpGroup::work;
};
// The entry of kernels/ops.def named `name` (an overloaded name has one group).
consteval ListedOp listed_op(std::string_view name) {
#define DSV4_OP(group, ret, op, params, args) \
  if (name == #op) return {true, OpGroup::group};
#include "kernels/ops.def"
  return {};
}
}  // namespace detail

// The tag of one op of kernels/ops.def: its name and group. A name the list lacks does
// not compile.
template <OpName N>
struct OpTag {
  static constexpr std::string_view name = N.view();
  static_assert(detail::listed_op(name).listed,
                "OpTag<name>: no op of that name in kernels/ops.def");
  static constexpr OpGroup group = detail::listed_op(name).group;
};

// O is one of the tags: an op and its twins treated alike (rope and rope_dev).
template <class O, class... Tags>
concept OneOf = (std::same_as<O, Tags> || ...);

// An op's argument names as the tail of an argument list: (a, b) -> , a, b; () -> nothing.
#define DSV4_OP_COMMA_ARGS(...) __VA_OPT__(, ) __VA_ARGS__

template <class Self>
class OpDecorator : public Ops {
 public:
  explicit OpDecorator(Ops& inner) : in_(inner) {}
  Ops& inner() { return in_; }

  const char* name() const override { return in_.name(); }

#define DSV4_OP(group, ret, op, params, args)                                              \
  ret op params override {                                                                 \
    return static_cast<Self&>(*this).around(                                               \
        OpTag<#op>{}, [&]() -> ret { return in_.op args; } DSV4_OP_COMMA_ARGS args);     \
  }
#include "kernels/ops.def"

  // A decorator observes (or synchronizes around) every op, so it runs the step's ops
  // itself: nothing is captured beneath it, and the inner backend's counts stay as they
  // are (kernels/ops.h run_step).
  void run_step(const StepKey&, const std::function<void()>& body) override { body(); }
  StepGraphCounts step_graph_counts() const override { return in_.step_graph_counts(); }

 private:
  Ops& in_;
};

#undef DSV4_OP_COMMA_ARGS

// Forwards every op unchanged. A probe that observes one op derives from it and
// overrides that op as an ordinary virtual (the SwiGLU clamp probe's moe).
class ForwardingOps : public OpDecorator<ForwardingOps> {
 public:
  using OpDecorator::OpDecorator;

 private:
  friend class OpDecorator<ForwardingOps>;
  template <class O, class Run, class... A>
  decltype(auto) around(O, Run&& run, const A&...) {
    return run();
  }
};

}  // namespace dsv4
