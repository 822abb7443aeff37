#include "launcher/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <sstream>
#include <algorithm>

#include "base/error.h"

namespace dsv4 {

FaultPlan parse_fault_plan(const std::string& value) {
  std::stringstream in(value);
  std::string rank, op, action;
  std::getline(in, rank, ':');
  std::getline(in, op, ':');
  std::getline(in, action);
  FaultPlan plan;
  try {
    size_t used_rank = 0, used_op = 0;
    plan.rank = std::stoi(rank, &used_rank);
    plan.op = std::stoi(op, &used_op);
    if (used_rank != rank.size() || used_op != op.size()) plan.rank = -1;
  } catch (const std::exception&) {
    plan.rank = -1;
  }
  if (plan.rank < 0 || plan.op < 0 || (action != "error" && action != "kill" && action != "stop"))
    throw Error(cat("DSV4_FAULT_INJECT: '", value, "' (expected <rank>:<op>:<error|kill|stop>)"));
  plan.kill = action == "kill";
  plan.stop = action == "stop";
  return plan;
}

std::optional<FaultPlan> fault_plan_from_env(int n_ranks) {
  const char* value = std::getenv("DSV4_FAULT_INJECT");
  if (!value || !*value) return std::nullopt;
  const FaultPlan plan = parse_fault_plan(value);
  if (plan.rank >= n_ranks)
    throw Error(cat("DSV4_FAULT_INJECT: '", value, "' names rank ", plan.rank, ", but the job has ",
                    n_ranks, " rank(s) (0..", n_ranks - 1, ")"));
  return plan;
}

FaultInjection::FaultInjection(std::optional<FaultPlan> plan, int rank)
    : seen_(std::make_shared<int>(0)) {
  if (plan && plan->rank == rank) plan_ = plan;
}

std::function<void(int, const OpHeader&)> FaultInjection::hook() const {
  if (!plan_) return {};
  return [plan = *plan_, seen = seen_](int op, const OpHeader& header) {
    *seen = std::max(*seen, op + 1);
    if (op != plan.op) return;
    if (plan.kill) std::raise(SIGKILL);
    if (plan.stop) {
      std::raise(SIGSTOP);
      return;  // continued (SIGCONT): the run goes on
    }
    throw Error(cat("injected failure before operation ", op, " (",
                    op_kind_name(header.kind), ", DSV4_FAULT_INJECT)"));
  };
}

std::string FaultInjection::missed() const {
  if (!plan_ || *seen_ > plan_->op) return "";
  return cat("DSV4_FAULT_INJECT: rank ", plan_->rank, " ran ", *seen_, " operation(s); operation ",
             plan_->op, " never happened, so nothing was injected");
}

}  // namespace dsv4
