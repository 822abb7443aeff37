// Compressor pooling and finishing (MODEL.md §4.16 steps 3-6, §6.4): the pool kernel,
// then the same RMSNorm, rope and quantizer ops the rest of the backend uses.
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxEntries = 256;  // 2r (overlap) or r pool entries per output element

// One thread per (block b, dim e): softmax over the pool entries in f32 (exp, sum in entry
// order, divide), then sum_i w_i v_i in entry order (f32 chain, serving arm).
// kv, score [n_blocks*r, Lc] raw projections; prev [r, Lc] or null; pooled [n_blocks, d].
__global__ void compressor_pool_kernel(const float* kv, const float* score, int n_blocks, int r, int d,
                                       bool overlap, const float* prev_kv, const float* prev_score,
                                       cuda::DenseW ape, float* pooled) {
  const int lc = overlap ? 2 * d : d;
  const int entries = overlap ? 2 * r : r;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < int64_t{n_blocks} * d;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int b = static_cast<int>(i / d), e = static_cast<int>(i % d);
    const int64_t own = static_cast<int64_t>(b) * r;  // first own row
    // Entry n: (logit, value) of §4.16 step 3; prev entries first when overlapping.
    auto entry = [&](int n, float* logit, float* value) {
      if (overlap && n < r) {
        if (b >= 1) {
          const int64_t row = (own - r + n) * lc;
          *logit = score[row + e] + ape.at(static_cast<int64_t>(n) * lc + e);
          *value = kv[row + e];
        } else if (prev_kv) {
          const int64_t row = static_cast<int64_t>(n) * lc;
          *logit = prev_score[row + e] + ape.at(static_cast<int64_t>(n) * lc + e);
          *value = prev_kv[row + e];
        } else {  // block 0 without a predecessor: weight exactly 0
          *logit = -INFINITY;
          *value = 0.0f;
        }
        return;
      }
      const int own_i = overlap ? n - r : n;
      const int col = overlap ? d + e : e;
      const int64_t row = (own + own_i) * lc;
      *logit = score[row + col] + ape.at(static_cast<int64_t>(own_i) * lc + col);
      *value = kv[row + col];
    };
    float logit, value;
    float m = -INFINITY;
    for (int n = 0; n < entries; ++n) {
      entry(n, &logit, &value);
      m = m < logit ? logit : m;
    }
    float den = 0.0f;
    for (int n = 0; n < entries; ++n) {
      entry(n, &logit, &value);
      den += expf(logit - m);
    }
    float acc = 0.0f;
    for (int n = 0; n < entries; ++n) {
      entry(n, &logit, &value);
      acc += (expf(logit - m) / den) * value;
    }
    pooled[i] = acc;
  }
}

void check_compressor(const CompressorWeights& c) {
  if (c.ratio <= 0 || c.d <= 0)
    throw Error(cat("compressor ", c.ape.name, ": ratio ", c.ratio, " and d ", c.d, " must be positive"));
  if (c.overlap != (c.ratio == 4))
    throw Error(cat("compressor ", c.ape.name, ": overlap flag disagrees with ratio ", c.ratio));
  if (c.ape.shape != std::vector<int64_t>{c.ratio, c.latent()})
    throw Error(cat("compressor: ", c.ape.name, " must have shape [", c.ratio, ", ", c.latent(), "]"));
  if (c.norm.numel() != c.d)
    throw Error(cat("compressor: ", c.norm.name, " must have ", c.d, " entries"));
  if ((c.overlap ? 2 : 1) * c.ratio > kMaxEntries)
    throw Error(cat("compressor ", c.ape.name, ": ratio ", c.ratio, " exceeds the CUDA pool limit"));
}

}  // namespace

void CudaOps::compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                              int n_blocks, const float* prev_kv, const float* prev_score,
                              int first_block, const RopeTable& rope, double norm_eps,
                              const Numerics& num, float* out) {
  if (n_blocks <= 0) return;
  check_compressor(c);
  DSV4_CHECK((prev_kv == nullptr) == (prev_score == nullptr), "prev kv/score must come together");
  const int d = c.d, rd = rope.rope_dim;
  if (rd <= 0 || rd > d)
    throw Error(cat("compressor ", c.ape.name, ": rope dim ", rd, " does not fit d = ", d));
  activate();
  const cuda::DenseW ape = dense(c.ape, c.latent());
  const int64_t n = static_cast<int64_t>(n_blocks) * d;
  compressor_pool_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(
      kv, score, n_blocks, c.ratio, d, c.overlap, prev_kv, prev_score, ape, out);
  DSV4_CUDA_LAUNCH_CHECK();
  rmsnorm(out, c.norm, n_blocks, d, norm_eps, out);  // step 4
  std::vector<int32_t> positions(static_cast<size_t>(n_blocks));  // step 5: first token j*r
  for (int b = 0; b < n_blocks; ++b) positions[b] = (first_block + b) * c.ratio;
  this->rope(out, n_blocks, 1, d, rope, positions.data(), false);
  if (c.rotate) {  // step 6, indexer: Hadamard + FP4, both skipped with indexer_quant none
    if (num.indexer_quant == IndexerQuant::fp4) hadamard_fp4(out, n_blocks, d, true);
  } else
    kv_act_quant(out, n_blocks, d, rd, num.kv_quant);
}

}  // namespace dsv4
