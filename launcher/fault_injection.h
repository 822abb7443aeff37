// A debugging aid for the failure paths (configs/README.md "Fault injection"):
//   DSV4_FAULT_INJECT=<rank>:<op>:<error|kill>
// makes rank <rank> throw an Error (error) or raise SIGKILL on itself (kill) just before
// its operation number <op> (0 = the prefill). Unset: no effect. The multi-rank tests
// use it to check that no rank hangs when another fails.
#pragma once
#include <functional>
#include <string>

#include "comm/control_plane.h"

namespace dsv4 {

struct FaultPlan {
  int rank = -1, op = -1;
  bool kill = false;
};

// Parses the variable's value; throws Error naming DSV4_FAULT_INJECT.
FaultPlan parse_fault_plan(const std::string& value);

// The before-operation hook for `rank` from the environment (empty when nothing to do).
std::function<void(int, const OpHeader&)> fault_hook_from_env(int rank);

}  // namespace dsv4
