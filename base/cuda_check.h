// One check macro for CUDA runtime calls and one for kernel launches (CONVENTIONS.md
// "Errors"), for every folder's CUDA code (kernels/cuda, comm/cuda): a failure throws
// base/call_failure.h's CallFailed naming the call, the CUDA error, file, line, rank,
// host and pid, so the launcher reports it and tells the other ranks.
#pragma once
#include <cuda_runtime.h>

#include "base/call_failure.h"

#define DSV4_CUDA_CHECK(call)                                                           \
  do {                                                                                  \
    const cudaError_t dsv4_cuda_err_ = (call);                                          \
    if (dsv4_cuda_err_ != cudaSuccess)                                                  \
      ::dsv4::call_failed("CUDA", #call,                                                \
                          ::dsv4::cat(cudaGetErrorName(dsv4_cuda_err_), " (",           \
                                      cudaGetErrorString(dsv4_cuda_err_), ")"),         \
                          __FILE__, __LINE__);                                          \
  } while (0)

// After every kernel launch: reports a bad launch configuration at the launch site.
#define DSV4_CUDA_LAUNCH_CHECK() DSV4_CUDA_CHECK(cudaGetLastError())
