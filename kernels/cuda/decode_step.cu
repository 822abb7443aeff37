// The device-step ops of plain decode and verify rows (kernels/ops.h "device step"): the
// merged index rows of the positions read from device memory,
// so a step's or a verify round's launches are the same at every position (issue 12).
// Twins: kernels/cpu/decode_step. finish_kv_at: kernels/cuda/finish_kv.cu.
#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
constexpr int kOverlapRatio = 4;  // the indexer's ratio: its tail is the top-k's

// MODEL.md §4.15 / §6.3 window part (kernels/index_laws.cpp window_row with ring slots q mod W,
// or, trans_base >= 0, SPECDECODE §4.2's transient row trans_base + q - pos[0] for an
// in-round q), §4.17 coarse part W + j for the (p+1)/r completed blocks (ratio > 4), -1
// elsewhere. Grid: x the columns, y the rows (row t at p = pos[t]). Blocks a position sees
// beyond tail_width are dropped (the CPU twin refuses them; the stage's tail is the store's
// capacity, which no position exceeds).
__global__ void decode_index_kernel(const int32_t* pos, int rows, int ratio, int window, int tail_width,
                                    int trans_base, int32_t* idx, int32_t* n_visible) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t pos0 = pos[0];
  const int width = window + tail_width;
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    const int64_t p = pos[t];
    const int64_t first = p - window + 1 > 0 ? p - window + 1 : 0;
    const int64_t blocks = ratio > 0 && p >= 0 ? (p + 1) / ratio : 0;
    int32_t* row = idx + static_cast<int64_t>(t) * width;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < width; k += gridDim.x * blockDim.x) {
      int32_t v = -1;
      if (k < window) {
        const int64_t q = first + k;
        if (p >= 0 && q <= p)
          v = static_cast<int32_t>(trans_base >= 0 && q >= pos0 ? trans_base + (q - pos0) : q % window);
      } else if (ratio != kOverlapRatio && k - window < blocks) {
        v = k;  // W + j with j = k - W
      }
      row[k] = v;
    }
    if (ratio == kOverlapRatio && blockIdx.x == 0 && threadIdx.x == 0) n_visible[t] = static_cast<int32_t>(blocks);
  }
}

}  // namespace

void CudaOps::decode_index(const int32_t* pos, int rows, int ratio, int window, int tail_width, int trans_base,
                           int32_t* idx, int32_t* n_visible) {
  DSV4_CHECK(rows >= 1 && window > 0 && tail_width >= 0 && ratio >= 0, "decode_index: ", rows, " rows, window ",
             window, " tail ", tail_width, " ratio ", ratio);
  DSV4_CHECK(ratio != kOverlapRatio || n_visible != nullptr, "decode_index: ratio 4 needs its n_visible row");
  activate();
  const dim3 grid(cuda::blocks_for(window + tail_width, kThreads), cuda::grid_rows(rows));
  cuda::launch(decode_index_kernel, grid, kThreads, 0, stream_, pos, rows, ratio, window, tail_width, trans_base, idx,
               n_visible);
}

}  // namespace dsv4
