// Kernel launches with Programmatic Dependent Launch (issue 12: a decode step of ~1,700
// kernels loses much of its time at kernel boundaries — each kernel's launch, block
// scheduling and first DRAM round trip, and the previous one's tail).
//
// CUDA C++ Programming Guide §4.5, "Programmatic Dependent Launch and Synchronization": a kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start before the
// kernel ahead of it in the stream has finished — once every block of that primary has
// executed griddepcontrol.launch_dependents (pdl_launch_dependents) or exited. Its
// griddepcontrol.wait (pdl_wait) returns when the primary grid has completed and its
// memory operations are visible; without the attribute the wait returns at once. In stream
// capture (CUDA 12.3+) the attribute becomes a programmatic edge between the two kernel
// nodes; an edge from any other node (a memcpy, a memset, an event from another stream:
// the op lines, hc_pre's Sinkhorn side stream) stays a full dependency, and so does the
// previous operation in a stream when it is not a kernel.
//
// The contract of every kernel launched by cuda::launch (the decode-step kernels): ALL its
// threads call pdl_wait() before their first global read of anything an earlier kernel
// writes and before their first global write; before the wait a kernel may only read
// memory no kernel of a step writes (the weights: resident before any step, never written
// by one). Then transitivity holds: a kernel's grid cannot complete before its own wait
// returned, i.e. before its primary completed, so a kernel reading the output of any
// earlier kernel sees it (a kernel that never waited could complete before its primary
// and break the chain: there is none). A kernel launched another way (<<<>>>: the prefill,
// weight-generation and dev-bench kernels; NCCL's; cuBLASLt's) is fully ordered after its
// predecessor by the stream as always, and a cuda::launch kernel after it waits for it.
// What an earlier kernel writes is read by plain loads: never through a `const T*
// __restrict__` parameter or __ldg, which the compiler may treat as invariant for the
// kernel's lifetime and so move above the wait (the CCCL review rule
// correctness.pdl-restrict-aliasing); weights may use both.
//
// pdl_launch_dependents() right after the wait lets the next kernel's blocks be scheduled
// while this one runs: they take only resources this grid leaves free (the trigger fires
// once all of this grid's blocks are resident or done, so it cannot starve it), load their
// first weights, and wait. At most two grids of a stream are in flight: a kernel triggers
// only after its own wait returned.
//
// Launches carry the attribute when PDL is on for the calling thread (set_pdl, set by
// CudaOps::activate from the run config's cuda_pdl); the kernels are the same either way,
// so results are bit-identical with it on or off. On by default: every kernel launched
// here keeps the contract above, and the GPU test "cuda pdl: ..." (tests/gpu/
// test_step_graph_cuda.cpp) holds decode steps and verify rounds to the bits of a run
// without it; cuda_pdl: false / --no-cuda-pdl is the A/B and the way to rule it out.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "base/cuda_check.h"

namespace dsv4::cuda {

// Whether cuda::launch sets the PDL attribute on this thread (default off).
inline bool& pdl_flag() {
  thread_local bool on = false;
  return on;
}
inline void set_pdl(bool on) { pdl_flag() = on; }

// griddepcontrol.wait (sm_90+; a no-op for a launch without the attribute). The memory
// clobber keeps the compiler from moving a load or store above it.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// griddepcontrol.launch_dependents: this block no longer holds back the next kernel.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of `cluster`
// blocks along x (sm_90; 1: none), with the PDL attribute when it is on; a bad launch
// throws at the call (DSV4_CUDA_CHECK).
template <class... Params, class... Args>
void launch_clusters(unsigned cluster, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                     cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (pdl_flag()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n++].val.clusterDim = {cluster, 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = n;
  DSV4_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The same without clusters.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args&&... args) {
  launch_clusters(1, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace dsv4::cuda
