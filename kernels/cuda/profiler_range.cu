// kernels/profiler_range.h on the CUDA backend.
#include <cuda_profiler_api.h>

#include "base/cuda_check.h"
#include "kernels/profiler_range.h"

namespace dsv4 {

void profiler_start() { DSV4_CUDA_CHECK(cudaProfilerStart()); }
void profiler_stop() { DSV4_CUDA_CHECK(cudaProfilerStop()); }

}  // namespace dsv4
