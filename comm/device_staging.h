// The MPI data plane on GPUs (ARCHITECTURE.md "What crosses a boundary", transport: mpi
// with backend: cuda): whether this MPI library takes device pointers (CUDA-aware, asked
// at run time), and the pinned host memory device payloads are staged through when it
// does not. No CUDA header here: the CPU build links the refusing twin (comm/no_nccl/).
#pragma once
#include <cstddef>
#include <memory>

namespace dsv4 {

// MPIX_Query_cuda_support() where the MPI headers provide it (Open MPI's mpi-ext.h with
// MPIX_CUDA_AWARE_SUPPORT), so the answer is the library's at run time, not the one it
// was compiled against; false for an MPI without the query. Call after MPI_Init.
bool mpi_cuda_aware();

// n floats of page-locked host memory (cudaMallocHost), freed with its last owner.
// Throws Error naming the size and the host on failure, or on a build without CUDA.
std::shared_ptr<float> alloc_pinned_floats(size_t n);

}  // namespace dsv4
