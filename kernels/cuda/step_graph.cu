// CudaOps::run_step: a plain decode step as one CUDA graph per (stage, rows), captured
// after a warm-up and replayed (issue 12; the rule is kernels/step_graphs.h). A graph
// node costs ~0.5-1 us where a launch from the host costs >= 5.5 us.
#include <exception>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4 {

namespace {

// The step in an error message.
std::string step_name(const StepKey& key) {
  return cat("the step of ", key.rows, " row(s) of owner ", key.owner);
}

}  // namespace

void CudaOps::refuse_in_capture(const char* what, size_t bytes) const {
  if (!capturing_) return;
  throw Error(cat("backend cuda: ", what, " (", bytes, " bytes) inside a step being captured as a "
                  "CUDA graph: a graph replays device work only, so a step's host values must be "
                  "uploaded before Ops::run_step and its memory allocated by its warm-up "
                  "(kernels/ops.h run_step; cuda_graphs: false runs every step op by op)"));
}

void CudaOps::run_step(const StepKey& key, const std::function<void()>& body) {
  join_lines();  // a step starts and ends on the main line (kernels/ops.h on_line)
  if (!step_graphs_on_) {
    body();
    join_lines();
    return;
  }
  DSV4_CHECK(!capturing_, "run_step inside a captured step");
  activate();
  switch (graphs_.next(key, *generation_)) {
    case StepAction::plain:
      body();
      join_lines();
      graphs_.ran_plain(key, *generation_);
      return;
    case StepAction::capture: {
      const uint64_t generation = *generation_;
      GraphExec exec = capture(key, body);
      // capture() refuses every allocation and free, so the memory is the warm-up's.
      DSV4_CHECK(*generation_ == generation, "memory moved during a capture");
      graphs_.store(key, generation, std::move(exec));
      break;
    }
    case StepAction::replay: break;
  }
  DSV4_CUDA_CHECK(cudaGraphLaunch(graphs_.graph(key).get(), stream_));
}

// Thread-local mode: only this thread's unsafe calls (cudaMalloc, a synchronization) end
// the capture with an error; other threads' CUDA work is not affected.
GraphExec CudaOps::capture(const StepKey& key, const std::function<void()>& body) {
  DSV4_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  cudaGraph_t graph = nullptr;
  try {
    body();
    join_lines();  // every line's branch rejoins the captured stream before the capture ends
  } catch (const std::exception& e) {
    capturing_ = false;
    split_pending_ = false;  // a split forked inside the capture dies with it
    try {
      join_lines();  // the lines forked inside it rejoin, so the capture can end
    } catch (const std::exception&) {  // an invalidated capture may refuse even that
      leave_lines();
    }
    // Ends the capture (invalidated or not) so the stream takes work again.
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error is reported below, not by the next launch
    throw Error(cat("backend cuda: capture of ", step_name(key), " failed: ", e.what()));
  }
  capturing_ = false;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (end != cudaSuccess || !graph) {
    cudaGetLastError();
    throw Error(cat("backend cuda: capture of ", step_name(key), " failed at its end: ",
                    cudaGetErrorName(end), " (", cudaGetErrorString(end),
                    "); an op of the step used the stream in a way a graph cannot hold"));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(cat("backend cuda: instantiating the graph of ", step_name(key), " failed: ",
                    cudaGetErrorName(made), " (", cudaGetErrorString(made), ")"));
  }
  return GraphExec(exec, graph);  // the graph kept: its nodes name the instance's
}

void CudaOps::allow_smem(const void* kernel, size_t bytes) {
  size_t& allowed = smem_allowed_[kernel];
  if (bytes <= allowed) return;
  DSV4_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  allowed = bytes;
}

}  // namespace dsv4
