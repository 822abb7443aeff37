// The knockout on CudaOps' step graphs (kernels/step_knockout.h): a held graph's kernel
// nodes are read from the graph it was instantiated from (GraphExec::source), named by
// cudaFuncGetName and demangled, and switched in the instance by cudaGraphNodeSetEnabled.
#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/step_knockout.h"

namespace dsv4 {

namespace {

std::string demangled(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(mangled);
}

// f(exec, node, kernel name) for every kernel node of every step graph ops holds.
template <class F>
void for_each_kernel_node(const CudaOps& ops, F&& f) {
  ops.for_each_step_graph([&](const GraphExec& g) {
    size_t n = 0;
    DSV4_CUDA_CHECK(cudaGraphGetNodes(g.source(), nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    DSV4_CUDA_CHECK(cudaGraphGetNodes(g.source(), nodes.data(), &n));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      DSV4_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) continue;
      cudaKernelNodeParams p{};
      DSV4_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
      const char* name = nullptr;
      DSV4_CUDA_CHECK(cudaFuncGetName(&name, p.func));
      f(g.get(), node, kernel_base_name(demangled(name)));
    }
  });
}

}  // namespace

std::vector<StepKernel> step_graph_kernels(Ops& ops) {
  const auto* cuda_ops = dynamic_cast<const CudaOps*>(&ops);
  if (!cuda_ops) return {};
  std::vector<StepKernel> kernels;
  for_each_kernel_node(*cuda_ops, [&](cudaGraphExec_t, cudaGraphNode_t, const std::string& name) {
    for (StepKernel& k : kernels)
      if (k.name == name) return void(++k.nodes);
    kernels.push_back({name, 1});
  });
  return kernels;
}

void set_step_kernel_enabled(Ops& ops, const std::string& name, bool enabled) {
  const CudaOps& c = cuda_backend(ops, "the step graphs' knockout");
  int found = 0;
  for_each_kernel_node(c, [&](cudaGraphExec_t exec, cudaGraphNode_t node, const std::string& k) {
    if (k != name) return;
    DSV4_CUDA_CHECK(cudaGraphNodeSetEnabled(exec, node, enabled ? 1 : 0));
    ++found;
  });
  if (found == 0) throw Error(cat("knockout: no step graph held has kernel '", name, "'"));
}

}  // namespace dsv4
