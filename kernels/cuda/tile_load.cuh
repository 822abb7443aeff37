// Shared-memory staging shared by the tiled CUDA kernels (attention, indexer): rows are
// copied with cp.async so a block has every byte of its tile in flight at once.
#pragma once
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda {

// Starts dst[0, n) = src[0, n) (shared <- global) by one warp: 16-byte copies when `vec`
// (src and dst 16-byte aligned, n % 4 == 0), else 4-byte ones; zeros when src is null (a
// pad row, so no stale shared memory is ever read). Completed by copies_wait() and then a
// block barrier.
__device__ inline void warp_copy_row_async(float* dst, const float* src, int n, bool vec) {
  const int lane = threadIdx.x % kWarp;
  if (src == nullptr) {
    for (int i = lane; i < n; i += kWarp) dst[i] = 0.0f;
  } else if (vec) {
    for (int i = 4 * lane; i < n; i += 4 * kWarp) __pipeline_memcpy_async(dst + i, src + i, 16);
  } else {
    for (int i = lane; i < n; i += kWarp) __pipeline_memcpy_async(dst + i, src + i, 4);
  }
}

// Waits for this thread's copies; a __syncthreads() after it publishes the whole tile.
__device__ inline void copies_wait() {
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace dsv4::cuda
