// alloc_pinned_floats (comm/device_staging.h): one cudaMallocHost per transport, made at
// start-up for the largest payload of the run.
#include <cuda_runtime.h>

#include "base/error.h"
#include "base/host.h"
#include "comm/device_staging.h"

namespace dsv4 {

std::shared_ptr<float> alloc_pinned_floats(size_t n) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, n * sizeof(float));
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it: the failure is reported, not sticky
    throw Error(cat("transport mpi: cudaMallocHost of ", n * sizeof(float), " bytes (the "
                    "staging buffer of the largest payload) failed on host ", host_name(),
                    ": ", cudaGetErrorString(err)));
  }
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { cudaFreeHost(q); });
}

}  // namespace dsv4
