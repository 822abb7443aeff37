// Sparse sink attention (MODEL.md §4.20 with D12), serving arm: f32 chains in a fixed
// order. One block per (row, head); -1 index entries are skipped entirely (law 3).
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxWidth = 12 * 1024;  // logits live in 48 KB of shared memory

// q [rows, heads, dim]; kv [*, dim]; idx [rows, width]; o [rows, heads, dim].
__global__ void sink_attention_kernel(const float* q, int rows, int heads, int dim, const float* kv,
                                      const int32_t* idx, int width, cuda::DenseW sink, float scale,
                                      float* o) {
  extern __shared__ float p[];  // [width]: logits, then exp(logit - m)
  __shared__ float shared[cuda::kWarp];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int warps = blockDim.x / cuda::kWarp;
  for (int64_t th = blockIdx.x; th < static_cast<int64_t>(rows) * heads; th += gridDim.x) {
    const int64_t t = th / heads;
    const int h = static_cast<int>(th % heads);
    const float* qh = q + th * dim;
    const int32_t* row = idx + t * width;
    __syncthreads();  // p of the previous (row, head) is consumed
    for (int k = warp; k < width; k += warps) {  // one warp per logit, fixed lane order
      const int32_t j = row[k];
      if (j < 0) continue;
      const float* v = kv + static_cast<int64_t>(j) * dim;
      float dot = 0.0f;
      for (int i = lane; i < dim; i += cuda::kWarp) dot += qh[i] * v[i];
      dot = cuda::warp_sum(dot);
      if (lane == 0) p[k] = scale * dot;
    }
    __syncthreads();
    const float sink_logit = sink.at(h);
    float m = sink_logit;  // D12: the sink takes part in the max
    for (int k = threadIdx.x; k < width; k += blockDim.x)
      if (row[k] >= 0) m = fmaxf(m, p[k]);
    m = cuda::block_max(m, shared);
    float part = 0.0f;
    for (int k = threadIdx.x; k < width; k += blockDim.x) {
      if (row[k] < 0) continue;
      p[k] = expf(p[k] - m);
      part += p[k];
    }
    const float den = cuda::block_sum(part, shared) + expf(sink_logit - m);
    __syncthreads();  // p complete
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      float acc = 0.0f;
      for (int k = 0; k < width; ++k) {  // index-row order
        const int32_t j = row[k];
        if (j < 0) continue;
        acc += p[k] * kv[static_cast<int64_t>(j) * dim + i];
      }
      o[th * dim + i] = acc / den;
    }
  }
}

}  // namespace

void CudaOps::sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                             const int32_t* idx, int width, const TensorView& sink, float scale,
                             float* o) {
  if (sink.numel() != heads)
    throw Error(cat("sink_attention: ", sink.name, " has ", sink.numel(), " entries, expected ",
                    heads, " heads"));
  if (width > kMaxWidth)
    throw Error(cat("sink_attention: index width ", width, " exceeds the CUDA kernel's limit of ",
                    kMaxWidth));
  const int64_t blocks = static_cast<int64_t>(rows) * heads;
  if (blocks == 0) return;
  activate();
  const cuda::DenseW s = dense(sink, heads);
  const unsigned grid = static_cast<unsigned>(blocks > 65535 * 32 ? 65535 * 32 : blocks);
  sink_attention_kernel<<<grid, kThreads, (width > 0 ? width : 1) * sizeof(float), stream_>>>(
      q, rows, heads, dim, kv, idx, width, s, scale, o);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
