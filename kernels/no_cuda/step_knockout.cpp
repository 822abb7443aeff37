// The knockout of a build without CUDA (kernels/step_knockout.h): no backend holds a graph.
#include "kernels/step_knockout.h"

#include "base/error.h"

namespace dsv4 {

std::vector<StepKernel> step_graph_kernels(Ops&) { return {}; }

void set_step_kernel_enabled(Ops& ops, const std::string& name, bool) {
  throw Error(cat("knockout of kernel ", name, ": backend ", ops.name(), " holds no step graphs (a build without CUDA)"));
}

}  // namespace dsv4
