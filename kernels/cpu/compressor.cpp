#include "kernels/cpu/compressor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/norm.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/rope.h"
#include "base/error.h"

namespace dsv4 {
namespace {

void check_compressor(const CompressorWeights& c) {
  const int Lc = c.latent();
  if (c.ratio <= 0 || c.d <= 0)
    throw Error(cat("compressor ", c.ape.name, ": ratio ", c.ratio, " and d ", c.d,
                    " must be positive"));
  if (c.overlap != (c.ratio == 4))
    throw Error(cat("compressor ", c.ape.name, ": overlap flag disagrees with ratio ", c.ratio));
  if (c.ape.shape != std::vector<int64_t>{c.ratio, Lc})
    throw Error(cat("compressor: ", c.ape.name, " must have shape [", c.ratio, ", ", Lc, "]"));
  if (c.norm.numel() != c.d)
    throw Error(cat("compressor: ", c.norm.name, " must have ", c.d, " entries"));
}

}  // namespace

void cpu_compressor_pool(CpuWeightCache& cache, const CompressorWeights& c, const float* kv,
                         const float* score, int n_blocks, const float* prev_kv,
                         const float* prev_score, float* pooled, float* weights) {
  check_compressor(c);
  DSV4_CHECK((prev_kv == nullptr) == (prev_score == nullptr), "prev kv/score must come together");
  const int r = c.ratio, d = c.d, Lc = c.latent();
  const int entries = c.overlap ? 2 * r : r;
  const float* ape = cache.widened(c.ape);  // [r, Lc]
  std::vector<float> logit(entries), value(entries), ex(entries);
  for (int b = 0; b < n_blocks; ++b) {
    const size_t own = static_cast<size_t>(b) * r;  // first own row
    for (int e = 0; e < d; ++e) {
      // Gather the pool entries of dim e: (raw score + ape) and value (§4.16 step 3).
      auto take = [&](int i, const float* kv_row, const float* score_row, int col, int ape_row) {
        logit[i] = score_row[col] + ape[static_cast<size_t>(ape_row) * Lc + col];
        value[i] = kv_row[col];
      };
      if (c.overlap) {
        for (int i = 0; i < r; ++i) {
          if (b >= 1) {
            const size_t row = (own - r + i) * Lc;
            take(i, kv + row, score + row, e, i);
          } else if (prev_kv) {
            const size_t row = static_cast<size_t>(i) * Lc;
            take(i, prev_kv + row, prev_score + row, e, i);
          } else {  // block 0 has no predecessor: weight exactly 0
            logit[i] = -std::numeric_limits<float>::infinity();
            value[i] = 0.0f;
          }
        }
        for (int i = 0; i < r; ++i) {
          const size_t row = (own + i) * Lc;
          take(r + i, kv + row, score + row, d + e, i);
        }
      } else {
        for (int i = 0; i < r; ++i) {
          const size_t row = (own + i) * Lc;
          take(i, kv + row, score + row, e, i);
        }
      }
      // Softmax over the entries in f32 (R and E both pool in f32).
      const float m = *std::max_element(logit.begin(), logit.end());
      float den = 0.0f;
      for (int i = 0; i < entries; ++i) {
        ex[i] = std::exp(logit[i] - m);
        den += ex[i];
      }
      double acc = 0.0;
      for (int i = 0; i < entries; ++i) {
        const float w = ex[i] / den;
        if (weights) weights[(static_cast<size_t>(b) * entries + i) * d + e] = w;
        acc += double(w) * double(value[i]);
      }
      pooled[static_cast<size_t>(b) * d + e] = static_cast<float>(acc);
    }
  }
}

void cpu_compress_blocks(CpuWeightCache& cache, const CompressorWeights& c, const float* kv,
                         const float* score, int n_blocks, const float* prev_kv,
                         const float* prev_score, int first_block, const RopeTable& rope,
                         double norm_eps, const Numerics& num, float* out) {
  if (n_blocks <= 0) return;
  const int d = c.d, rd = rope.rope_dim;
  if (rd <= 0 || rd > d)
    throw Error(cat("compressor ", c.ape.name, ": rope dim ", rd, " does not fit d = ", d));
  cpu_compressor_pool(cache, c, kv, score, n_blocks, prev_kv, prev_score, out);
  cpu_rmsnorm(cache, out, c.norm, n_blocks, d, norm_eps, out);  // step 4
  std::vector<int32_t> positions(n_blocks);  // step 5: block j at its first token j*r
  for (int b = 0; b < n_blocks; ++b) positions[b] = (first_block + b) * c.ratio;
  cpu_rope(out, n_blocks, 1, d, rope, positions.data(), false);
  if (c.rotate) {  // step 6, indexer: Hadamard + FP4, both skipped with indexer_quant none
    if (num.indexer_quant == IndexerQuant::fp4) cpu_hadamard_fp4(out, n_blocks, d, true);
  } else
    cpu_kv_act_quant(out, n_blocks, d, rd, num.kv_quant);
}

}  // namespace dsv4
