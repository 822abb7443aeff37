// Compressor pooling and finishing (MODEL.md §4.16 steps 3-6, §6.4): the pool kernel,
// then the same RMSNorm, rope and quantizer ops the rest of the backend uses.
#include <algorithm>
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

// compress_at's rope position: the first token (p / r) * r of the block p falls in.
__global__ void step_block_position_kernel(const int32_t* pos, int r, int32_t* position) {
  const int32_t p = *pos;
  *position = p < 0 ? -1 : p / r * r;  // -1: a NaN row, never committed (p < 0 completes nothing)
}

// compress_at's effects when a block completes at p ((p+1) mod r == 0): the finished row
// to store + (p / r) * d, then (overlap) pending rows [r, 2r) -> [0, r) of kv and score
// (half = r * Lc floats each; the pool that read them ran before this kernel).
__global__ void compress_commit_kernel(const int32_t* pos, int r, int d, const float* row, float* store,
                                       bool overlap, int64_t half, float* pend_kv, float* pend_score) {
  const int64_t p = *pos;
  if (p < 0 || (p + 1) % r != 0) return;  // uniform: every thread reads the same p
  float* dst = store + p / r * d;
  const int64_t n = overlap ? (half > d ? half : d) : d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    if (i < d) dst[i] = row[i];
    if (overlap && i < half) {
      pend_kv[i] = pend_kv[half + i];
      pend_score[i] = pend_score[half + i];
    }
  }
}

void check_rope_fit(const CompressorWeights& c, const RopeTable& rope) {
  if (rope.rope_dim <= 0 || rope.rope_dim > c.d)
    throw Error(cat("compressor ", c.ape.name, ": rope dim ", rope.rope_dim, " does not fit d = ", c.d));
}

}  // namespace

void CudaOps::compress_rows(const CompressorWeights& c, const float* kv, const float* score, int n_blocks,
                            const float* prev_kv, const float* prev_score, const int32_t* positions,
                            const RopeTable& rope, double norm_eps, const Numerics& num, float* out) {
  const int d = c.d;
  const cuda::DenseW ape = dense(c.ape, c.latent());
  const int64_t n = static_cast<int64_t>(n_blocks) * d;
  compressor_pool_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(
      kv, score, n_blocks, c.ratio, d, c.overlap, prev_kv, prev_score, ape, out);
  DSV4_CUDA_LAUNCH_CHECK();
  rmsnorm(out, c.norm, n_blocks, d, norm_eps, out);  // step 4
  rope_dev(out, n_blocks, 1, d, rope, positions, false);  // step 5
  if (c.rotate) {  // step 6, indexer: Hadamard + FP4, both skipped with indexer_quant none
    if (num.indexer_quant == IndexerQuant::fp4) hadamard_fp4(out, n_blocks, d, true);
  } else
    kv_act_quant(out, n_blocks, d, rope.rope_dim, num.kv_quant);
}

void CudaOps::compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                              int n_blocks, const float* prev_kv, const float* prev_score,
                              int first_block, const RopeTable& rope, double norm_eps,
                              const Numerics& num, float* out) {
  if (n_blocks <= 0) return;
  check_compressor(c);
  DSV4_CHECK((prev_kv == nullptr) == (prev_score == nullptr), "prev kv/score must come together");
  check_rope_fit(c, rope);
  std::vector<int32_t> positions(static_cast<size_t>(n_blocks));  // step 5: first token j*r
  for (int b = 0; b < n_blocks; ++b) {
    positions[b] = (first_block + b) * c.ratio;
    if (positions[b] < 0 || positions[b] >= rope.positions)
      throw Error(cat("rope: position ", positions[b], " (row ", b, ") outside the table of ",
                      rope.positions, " positions"));
  }
  activate();
  compress_rows(c, kv, score, n_blocks, prev_kv, prev_score,
                stage_i32(Slot::host_args2, positions.data(), positions.size()), rope, norm_eps, num, out);
}

// Issue 12: the same launches at every position. The candidate block (the one p falls in)
// is pooled, normed, roped and quantized into a scratch row every step (one block: d
// threads, a few us at most); only compress_commit_kernel depends on whether it completed.
void CudaOps::compress_at(const CompressorWeights& c, const int32_t* pos, float* pend_kv,
                          float* pend_score, const RopeTable& rope, double norm_eps,
                          const Numerics& num, float* store) {
  check_compressor(c);
  check_rope_fit(c, rope);
  activate();
  const int d = c.d, r = c.ratio;
  const int64_t half = static_cast<int64_t>(r) * c.latent();
  const int64_t cur = c.overlap ? half : 0;
  // [0, 16): the rope position (16-byte aligned row after it); [16, 16 + 4d): the row.
  auto* base = static_cast<uint8_t*>(scratch(Slot::step_block, 16 + static_cast<size_t>(d) * sizeof(float)));
  auto* position = reinterpret_cast<int32_t*>(base);
  auto* row = reinterpret_cast<float*>(base + 16);
  step_block_position_kernel<<<1, 1, 0, stream_>>>(pos, r, position);
  DSV4_CUDA_LAUNCH_CHECK();
  compress_rows(c, pend_kv + cur, pend_score + cur, 1, c.overlap ? pend_kv : nullptr,
                c.overlap ? pend_score : nullptr, position, rope, norm_eps, num, row);
  const int64_t n = c.overlap ? std::max<int64_t>(half, d) : d;
  compress_commit_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(
      pos, r, d, row, store, c.overlap, half, pend_kv, pend_score);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
