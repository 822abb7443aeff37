// A debugging aid for the failure paths (configs/README.md "Fault injection"):
//   DSV4_FAULT_INJECT=<rank>:<op>:<error|kill|stop>
// makes rank <rank> throw an Error (error), raise SIGKILL on itself (kill) or SIGSTOP
// (stop: the process freezes, its peers' liveness check must end the job) just before
// its operation number <op> (0 = the prefill). Unset: no effect. The multi-rank tests
// use it to check that no rank hangs when another fails.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/control_plane.h"

namespace dsv4 {

struct FaultPlan {
  int rank = -1, op = -1;
  bool kill = false, stop = false;
};

// Parses the variable's value; throws Error naming DSV4_FAULT_INJECT.
FaultPlan parse_fault_plan(const std::string& value);

// The plan in the environment (nullopt when unset); throws Error naming
// DSV4_FAULT_INJECT when it is malformed or names a rank the job does not have.
std::optional<FaultPlan> fault_plan_from_env(int n_ranks);

// One rank's share of the plan: the before-operation hook (empty when the plan targets
// another rank) and, after the run, whether the operation ever came.
class FaultInjection {
 public:
  FaultInjection() = default;
  FaultInjection(std::optional<FaultPlan> plan, int rank);
  std::function<void(int, const OpHeader&)> hook() const;
  // "" or the line reporting that this rank's operation never happened.
  std::string missed() const;

 private:
  std::optional<FaultPlan> plan_;
  std::shared_ptr<int> seen_ = std::make_shared<int>(0);  // operations the hook saw
};

}  // namespace dsv4
