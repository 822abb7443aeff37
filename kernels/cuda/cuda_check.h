// One check macro for CUDA runtime calls and one for kernel launches (CONVENTIONS.md
// "Errors"): a failure throws dsv4::Error naming the call, file, line, rank and host, so
// the launcher reports it and tells the other ranks.
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace dsv4 {

// Builds and throws the Error of a failed CUDA call.
[[noreturn]] void cuda_fail(cudaError_t err, const char* call, const char* file, int line);

}  // namespace dsv4

#define DSV4_CUDA_CHECK(call)                                             \
  do {                                                                    \
    const cudaError_t dsv4_cuda_err_ = (call);                            \
    if (dsv4_cuda_err_ != cudaSuccess)                                    \
      ::dsv4::cuda_fail(dsv4_cuda_err_, #call, __FILE__, __LINE__);       \
  } while (0)

// After every kernel launch: reports a bad launch configuration at the launch site.
#define DSV4_CUDA_LAUNCH_CHECK() DSV4_CUDA_CHECK(cudaGetLastError())
