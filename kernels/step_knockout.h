// Which kernels a decode step's time waits on (issue 12; dsv4-bench-decode --knockout):
// every node of one kernel function disabled in the step graphs a backend holds, the step
// re-timed, the node re-enabled. A disabled kernel node does nothing while its edges still
// order the rest, so the time it saves is what that kernel costs on the step's critical
// path with everything around it as it is — what a serialized per-kernel profile (ncu)
// cannot say under PDL and the step's concurrent lines. The outputs of a step with a
// disabled kernel are wrong: for measurement only.
#pragma once
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace dsv4 {

// A kernel function of the held step graphs: its name as kernel_base_name gives it and its
// nodes in all of them.
struct StepKernel {
  std::string name;
  int nodes = 0;
};

// The kernels of the step graphs `ops` holds now, by name (first seen first); empty for a
// backend that holds none (the CPU's, a CUDA backend with cuda_graphs off or not yet
// captured, a build without CUDA).
std::vector<StepKernel> step_graph_kernels(Ops& ops);

// Disables (enabled = false) or re-enables every node of kernel `name` in every step graph
// `ops` holds; throws Error naming the kernel when no held graph has it.
void set_step_kernel_enabled(Ops& ops, const std::string& name, bool enabled);

// 'void ns::(anonymous namespace)::k<ns::T, 1>(Args)' -> 'k<T,1>': a demangled kernel name
// without its return type, namespaces (in its template arguments too), parameter list and
// spaces: the names of scripts/kernel_times.py's tables of ncu reports.
std::string kernel_base_name(const std::string& demangled);

// 'a,k<2,true>,b' -> {a, k<2,true>, b}: a comma-separated list of such names, split only at
// commas outside template arguments and parentheses (the names hold commas of their own);
// empty entries dropped.
std::vector<std::string> split_kernel_names(const std::string& list);

}  // namespace dsv4
