#include "launcher/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <sstream>

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
  if (plan.rank < 0 || plan.op < 0 || (action != "error" && action != "kill"))
    throw Error(cat("DSV4_FAULT_INJECT: '", value, "' (expected <rank>:<op>:<error|kill>)"));
  plan.kill = action == "kill";
  return plan;
}

std::function<void(int, const OpHeader&)> fault_hook_from_env(int rank) {
  const char* value = std::getenv("DSV4_FAULT_INJECT");
  if (!value || !*value) return {};
  const FaultPlan plan = parse_fault_plan(value);
  if (plan.rank != rank) return {};
  return [plan](int op, const OpHeader& header) {
    if (op != plan.op) return;
    if (plan.kill) std::raise(SIGKILL);
    throw Error(cat("injected failure before operation ", op, " (",
                    op_kind_name(header.kind), ", DSV4_FAULT_INJECT)"));
  };
}

}  // namespace dsv4
