// Compressor pooling and finishing (MODEL.md §4.16 steps 3-6, §6.4) as one kernel: a block
// pools one compressed row into shared memory, then norms, ropes and quantizes it
// (cuda::finish_row: the rmsnorm, rope and quantizer ops' arithmetic and bits).
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/compress_kernel.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/finish_row.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

namespace {

using cuda::Finish;
using cuda::FinishArgs;

constexpr int kThreads = cuda::kFinishThreads;
constexpr int kMaxD = cuda::kMaxFinishDim;

// Step 3's inputs: kv, score [n_blocks*r, Lc] raw projections; prev_kv, prev_score [r, Lc]
// (block 0's predecessor when overlapping) or null.
struct PoolIn {
  const float* kv;
  const float* score;
  const float* prev_kv;
  const float* prev_score;
  cuda::DenseW ape;
  int r, d;
  bool overlap;
};

// Entry n of dim e of block b: (logit, value) of §4.16 step 3; prev entries first when
// overlapping.
__device__ void pool_entry(const PoolIn& in, int b, int e, int n, float* logit, float* value) {
  const int r = in.r, d = in.d;
  const int lc = in.overlap ? 2 * d : d;
  const int64_t own = static_cast<int64_t>(b) * r;  // first own row
  if (in.overlap && n < r) {
    if (b >= 1) {
      const int64_t row = (own - r + n) * lc;
      *logit = in.score[row + e] + in.ape.at(static_cast<int64_t>(n) * lc + e);
      *value = in.kv[row + e];
    } else if (in.prev_kv) {
      const int64_t row = static_cast<int64_t>(n) * lc;
      *logit = in.prev_score[row + e] + in.ape.at(static_cast<int64_t>(n) * lc + e);
      *value = in.prev_kv[row + e];
    } else {  // block 0 without a predecessor: weight exactly 0
      *logit = -INFINITY;
      *value = 0.0f;
    }
    return;
  }
  const int own_i = in.overlap ? n - r : n;
  const int col = in.overlap ? d + e : e;
  const int64_t row = (own + own_i) * lc;
  *logit = in.score[row + col] + in.ape.at(static_cast<int64_t>(own_i) * lc + col);
  *value = in.kv[row + col];
}

// Dims a thread pools side by side: independent chains, so more loads in flight (a ratio-128
// block reads 3 x 128 entries per dim in one CUDA block); the entry loops are unrolled by 8
// for the same reason (each chain keeps its order: unrolling reorders loads, not sums).
constexpr int kDimsPerThread = 2;

// Step 3 of block b's dims [lo, hi) into row[lo, hi) (shared or global): per dim, softmax
// over the pool entries in f32 (max, then exp and sum in entry order, divide), then sum_i
// w_i v_i in entry order (f32 chain, serving arm). Thread t pools dims lo + t + k * blockDim,
// as a plain stride loop would (K < kDimsPerThread: fewer chains a thread); a dim's
// operations do not depend on which thread runs them, nor on K.
template <int K = kDimsPerThread>
__device__ void pool_dims(const PoolIn& in, int b, int lo, int hi, float* row) {
  const int entries = in.overlap ? 2 * in.r : in.r;
  const int stride = static_cast<int>(blockDim.x);
  for (int e0 = lo + static_cast<int>(threadIdx.x); e0 < hi; e0 += K * stride) {
    int e[K];
    float m[K], den[K], acc[K], logit, value;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      e[k] = e0 + k * stride < hi ? e0 + k * stride : e0;  // past hi: a discarded twin
      m[k] = -INFINITY;
      den[k] = acc[k] = 0.0f;
    }
#pragma unroll 8
    for (int n = 0; n < entries; ++n)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        pool_entry(in, b, e[k], n, &logit, &value);
        m[k] = m[k] < logit ? logit : m[k];
      }
#pragma unroll 8
    for (int n = 0; n < entries; ++n)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        pool_entry(in, b, e[k], n, &logit, &value);
        den[k] += expf(logit - m[k]);
      }
#pragma unroll 8
    for (int n = 0; n < entries; ++n)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        pool_entry(in, b, e[k], n, &logit, &value);
        acc[k] += (expf(logit - m[k]) / den[k]) * value;
      }
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (e0 + k * stride < hi) row[e0 + k * stride] = acc[k];
  }
}
__device__ void pool_row(const PoolIn& in, int b, float* row) { pool_dims(in, b, 0, in.d, row); }

// Block b of the call -> out + b*d, roped at its first token (first_block + b) * r. Each
// thread pools and copies out the same elements e = tid + k*blockDim, so a block's next row
// waits only on finish_row's barriers.
__global__ void compress_blocks_kernel(PoolIn in, int n_blocks, int first_block, FinishArgs f, float* out) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float row[];  // [d]
  __shared__ float red[cuda::kWarp];
  const int d = in.d;
  for (int b = blockIdx.x; b < n_blocks; b += gridDim.x) {
    pool_row(in, b, row);
    __syncthreads();
    cuda::finish_row(row, d, f, static_cast<int64_t>(first_block + b) * in.r, red);
    for (int e = threadIdx.x; e < d; e += blockDim.x) out[static_cast<int64_t>(b) * d + e] = row[e];
  }
}

// Step 3 alone for a call of few blocks (issue 13: a ratio-128 layer's 1,024-token prefill
// pools 8 blocks, one SM each in the kernel above, 8 warps an SM each pooling 2 dims a
// thread): grid (blocks, chunks of kPoolDims dims), one warp a block, one dim a thread,
// pooling its chunk of block b into out + b * d; cuda::finish_rows then finishes the rows in
// place (finish_row, as above), so the bits are compress_blocks_kernel's.
constexpr int kPoolDims = cuda::kWarp;
// CompressKernel::automatic pools calls of fewer blocks by pool_then_finish: a ratio-128
// prefill's 8 blocks of 1,024 tokens on 128 SMs (one warp each), not 8; a ratio-4 one's 256
// keep one_pass.
constexpr int kFewBlocks = 64;
__global__ void compress_pool_kernel(PoolIn in, int n_blocks, float* out) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int lo = static_cast<int>(blockIdx.y) * kPoolDims, hi = min(in.d, lo + kPoolDims);
  for (int b = blockIdx.x; b < n_blocks; b += gridDim.x) pool_dims<1>(in, b, lo, hi, out + static_cast<int64_t>(b) * in.d);
}

// compress_at in one block (issue 12: one launch at every position); nothing for p < 0 (its
// rope rows are NaN). p's rows row_kv, row_score [Lc] go to pending slot p mod r of the own
// rows (in.kv, in.score); when a block completes at p ((p+1) mod r == 0), it (prev rows at
// pend when overlapping) is finished into store + (p / r) * d, then (overlap) the pending
// rows [r, 2r) -> [0, r) of kv and score (half = r * Lc floats each).
__global__ void compress_at_kernel(PoolIn in, const int32_t* pos, const float* row_kv, const float* row_score,
                                   FinishArgs f, float* store, int64_t half, float* pend_kv, float* pend_score) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t p = *pos;
  if (p < 0) return;  // uniform: every thread reads the same p
  const int d = in.d, lc = in.overlap ? 2 * d : d;
  const int64_t slot = (in.overlap ? half : 0) + p % in.r * lc;  // in the own rows in.kv, in.score
  float* slot_kv = pend_kv + slot;
  float* slot_score = pend_score + slot;
  for (int i = threadIdx.x; i < lc; i += blockDim.x) {
    slot_kv[i] = row_kv[i];
    slot_score[i] = row_score[i];
  }
  if ((p + 1) % in.r != 0) return;  // uniform
  extern __shared__ float row[];    // [d]
  __shared__ float red[cuda::kWarp];
  __syncthreads();  // the pool reads the slot's row (global writes of the block are visible after it)
  pool_row(in, 0, row);
  __syncthreads();
  cuda::finish_row(row, d, f, p / in.r * in.r, red);
  float* dst = store + p / in.r * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) dst[e] = row[e];
  if (!in.overlap) return;
  // Every pool read of the pending rows came before finish_row's barriers.
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    pend_kv[i] = pend_kv[half + i];
    pend_score[i] = pend_score[half + i];
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
  if (c.d > kMaxD)
    throw Error(cat("compressor ", c.ape.name, ": d = ", c.d, " exceeds the CUDA row limit ", kMaxD));
}

void check_rope_fit(const CompressorWeights& c, const RopeTable& rope) {
  if (rope.rope_dim <= 0 || rope.rope_dim % 2 != 0 || rope.rope_dim > c.d)
    throw Error(cat("compressor ", c.ape.name, ": rope dim ", rope.rope_dim, " does not fit d = ", c.d));
}

PoolIn pool_in(const CompressorWeights& c, cuda::DenseW ape, const float* kv, const float* score,
               const float* prev_kv, const float* prev_score) {
  return {kv, score, prev_kv, prev_score, ape, c.ratio, c.d, c.overlap};
}

// The checked parameters of steps 4-6 but the device norm weight and rope table (the
// caller's); step 6 is skipped for an indexer with indexer_quant none.
FinishArgs finish_args(const CompressorWeights& c, const RopeTable& rope, double norm_eps, const Numerics& num) {
  check_compressor(c);
  check_rope_fit(c, rope);
  Finish how = num.kv_quant == KvQuant::e4m3 ? Finish::kv_e4m3 : Finish::kv_clamp;
  if (c.rotate) how = num.indexer_quant == IndexerQuant::fp4 ? Finish::hadamard_fp4 : Finish::none;
  if (how == Finish::hadamard_fp4) check_hadamard_dim(c.d);
  else if (how != Finish::none) check_kv_quant_dims(c.d, rope.rope_dim);
  return {{}, norm_eps, nullptr, rope.rope_dim, rope.positions, how, hadamard_scale(c.d)};
}

}  // namespace

void CudaOps::compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                              int n_blocks, const float* prev_kv, const float* prev_score,
                              int first_block, const RopeTable& rope, double norm_eps,
                              const Numerics& num, float* out) {
  compress_blocks_on(cuda::CompressKernel::automatic, c, kv, score, n_blocks, prev_kv, prev_score, first_block, rope,
                     norm_eps, num, out);
}

void cuda::compress_blocks_with(Ops& ops, CompressKernel kernel, const CompressorWeights& c, const float* kv,
                                const float* score, int n_blocks, const float* prev_kv, const float* prev_score,
                                int first_block, const RopeTable& rope, double norm_eps, const Numerics& num,
                                float* out) {
  cuda_backend(ops, "compress_blocks_with")
      .compress_blocks_on(kernel, c, kv, score, n_blocks, prev_kv, prev_score, first_block, rope, norm_eps, num, out);
}

void CudaOps::compress_blocks_on(cuda::CompressKernel kernel, const CompressorWeights& c, const float* kv,
                                 const float* score, int n_blocks, const float* prev_kv, const float* prev_score,
                                 int first_block, const RopeTable& rope, double norm_eps, const Numerics& num,
                                 float* out) {
  if (n_blocks <= 0) return;
  DSV4_CHECK((prev_kv == nullptr) == (prev_score == nullptr), "prev kv/score must come together");
  FinishArgs f = finish_args(c, rope, norm_eps, num);
  for (int b = 0; b < n_blocks; ++b) {  // step 5: block j at its first token j*r
    const int64_t position = static_cast<int64_t>(first_block + b) * c.ratio;
    if (position < 0 || position >= rope.positions)
      throw Error(cat("rope: position ", position, " (row ", b, ") outside the table of ",
                      rope.positions, " positions"));
  }
  activate();
  f.norm = dense(c.norm, c.d);
  f.fc = rope_table(rope);
  const PoolIn in = pool_in(c, dense(c.ape, c.latent()), kv, score, prev_kv, prev_score);
  if (kernel == cuda::CompressKernel::automatic)
    kernel = n_blocks < kFewBlocks ? cuda::CompressKernel::pool_then_finish : cuda::CompressKernel::one_pass;
  if (kernel == cuda::CompressKernel::pool_then_finish) {
    const dim3 grid(static_cast<unsigned>(n_blocks), static_cast<unsigned>((c.d + kPoolDims - 1) / kPoolDims));
    cuda::launch(compress_pool_kernel, grid, cuda::kWarp, 0, stream_, in, n_blocks, out);
    cuda::finish_rows(stream_, out, n_blocks, c.d, f, nullptr, static_cast<int64_t>(first_block) * c.ratio, c.ratio,
                      nullptr, 0);
    return;
  }
  const unsigned grid = static_cast<unsigned>(n_blocks > 65535 * 16 ? 65535 * 16 : n_blocks);
  cuda::launch(compress_blocks_kernel, grid, kThreads, c.d * sizeof(float), stream_, in, n_blocks, first_block, f, out);
}

// Issue 12: one launch at every position; the kernel reads p, writes the slot and pools
// only when a block completes there.
void CudaOps::compress_at(const CompressorWeights& c, const int32_t* pos, const float* row_kv,
                          const float* row_score, float* pend_kv, float* pend_score,
                          const RopeTable& rope, double norm_eps, const Numerics& num, float* store) {
  FinishArgs f = finish_args(c, rope, norm_eps, num);
  activate();
  f.norm = dense(c.norm, c.d);
  f.fc = rope_table(rope);
  const int64_t half = static_cast<int64_t>(c.ratio) * c.latent();
  const int64_t cur = c.overlap ? half : 0;
  const PoolIn in = pool_in(c, dense(c.ape, c.latent()), pend_kv + cur, pend_score + cur,
                            c.overlap ? pend_kv : nullptr, c.overlap ? pend_score : nullptr);
  cuda::launch(compress_at_kernel, 1, kThreads, c.d * sizeof(float), stream_, in, pos, row_kv, row_score, f, store,
               half, pend_kv, pend_score);
}

}  // namespace dsv4
