// KV compressor pooling and finishing (MODEL.md §4.16 steps 3-6, §6.4), CPU reference.
#pragma once

#include "kernels/cpu/weight_cache.h"
#include "kernels/numerics.h"
#include "kernels/rope_table.h"
#include "model/weights.h"

namespace dsv4 {

// §4.16 step 3 for n_blocks consecutive blocks; rows of kv / score have width
// Lc = c.latent() and hold the RAW projections (this op adds ape). Block b's own r rows
// are rows [b*r, (b+1)*r). With c.overlap its "prev" r rows are rows [(b-1)*r, b*r) for
// b >= 1 and, for b = 0, prev_kv / prev_score (r rows of width Lc, read through dims
// [0, d)), or (value 0, logit -inf) when prev_kv is null.
// Softmax per output dim in f32 (exp, sum in entry order, divide); the weighted sum
// sum_i w_i * v_i is a reduction chain, accumulated in f64 and rounded once (oracle arm).
// pooled [n_blocks, d]; weights (optional) [n_blocks, entries, d], entries = 2r or r,
// entry order prev 0..r-1 then cur 0..r-1.
void cpu_compressor_pool(CpuWeightCache& cache, const CompressorWeights& c, const float* kv,
                         const float* score, int n_blocks, const float* prev_kv,
                         const float* prev_score, float* pooled, float* weights = nullptr);

// Pool, then RMSNorm (c.norm, norm_eps), rope at position (first_block + b) * r on the
// last rope.rope_dim dims, then act_quant (num.kv_quant) on dims [0, d - rope_dim) when
// !c.rotate, or Hadamard with FP4 fake-quant when num.indexer_quant == fp4 (Hadamard
// alone when none, so indexer keys stay in the query's rotated basis). out [n_blocks, d].
void cpu_compress_blocks(CpuWeightCache& cache, const CompressorWeights& c, const float* kv,
                         const float* score, int n_blocks, const float* prev_kv,
                         const float* prev_score, int first_block, const RopeTable& rope,
                         double norm_eps, const Numerics& num, float* out);

}  // namespace dsv4
