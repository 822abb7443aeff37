// MODEL.md §4.15, §4.17, §4.19, §6.3, §6.4 at a position read from backend memory.
#include "kernels/cpu/decode_step.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/compressor.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/rope.h"
#include "kernels/index_laws.h"

namespace dsv4 {
namespace {

constexpr int kOverlapRatio = 4;  // the indexer's ratio: its tail is the top-k's

int64_t checked_pos(const int32_t* pos, const char* what) {
  if (*pos < 0) throw Error(cat(what, ": negative step position ", *pos));
  return *pos;
}

// base[(*pos mod slots) * n ..] = src[0 .. n): the ring slot (§6.3) or pending row (§6.4).
void copy_to_slot(float* base, const int32_t* pos, int slots, const float* src, size_t n, const char* what) {
  DSV4_CHECK(slots > 0, what, ": ", slots, " slots");
  const int64_t p = checked_pos(pos, what);
  if (n) std::memcpy(base + (p % slots) * static_cast<int64_t>(n), src, n * sizeof(float));
}

}  // namespace

void cpu_finish_kv(CpuWeightCache& cache, float* kv, const TensorView& norm, int rows, int dim, double eps,
                   const RopeTable& rope, const int32_t* positions, KvQuant variant) {
  cpu_rmsnorm(cache, kv, norm, rows, dim, eps, kv);
  cpu_rope(kv, rows, 1, dim, rope, positions, false);
  cpu_kv_act_quant(kv, rows, dim, rope.rope_dim, variant);
}

void cpu_finish_kv_at(CpuWeightCache& cache, float* kv, const TensorView& norm, int dim, double eps,
                      const RopeTable& rope, const int32_t* pos, KvQuant variant, float* ring,
                      int slots) {
  cpu_finish_kv(cache, kv, norm, 1, dim, eps, rope, pos, variant);
  copy_to_slot(ring, pos, slots, kv, static_cast<size_t>(dim), "finish_kv_at");
}

void cpu_decode_index(const int32_t* pos, int rows, int ratio, int window, int tail_width,
                      int trans_base, int32_t* idx, int32_t* n_visible) {
  DSV4_CHECK(rows >= 1 && tail_width >= 0 && ratio >= 0, "decode_index: ", rows, " rows, ratio ",
             ratio, " tail ", tail_width);
  DSV4_CHECK(ratio != kOverlapRatio || n_visible != nullptr, "decode_index: ratio 4 needs its n_visible row");
  const int64_t pos0 = checked_pos(pos, "decode_index");
  const int width = window + tail_width;
  for (int t = 0; t < rows; ++t) {
    const int64_t p = checked_pos(pos + t, "decode_index");
    DSV4_CHECK(p == pos0 + t, "decode_index: row ", t, " at position ", p, ", not ", pos0 + t);
    int32_t* row = idx + static_cast<int64_t>(t) * width;
    std::fill_n(row, width, -1);
    const std::vector<int32_t> win = trans_base < 0 ? window_decode_row(p, window)
                                                    : window_verify_row(p, pos0, window, trans_base);
    std::copy(win.begin(), win.end(), row);
    if (ratio == kOverlapRatio) {
      n_visible[t] = static_cast<int32_t>((p + 1) / ratio);  // §4.18 step 5
    } else if (ratio > 0) {
      const std::vector<int32_t> coarse = coarse_decode_row(p, ratio, window);
      if (static_cast<int64_t>(coarse.size()) > tail_width)
        throw Error(cat("decode_index: position ", p, " sees ", coarse.size(),
                        " compressed blocks, more than the tail width ", tail_width));
      std::copy(coarse.begin(), coarse.end(), row + window);
    }
  }
}

void cpu_compress_at(CpuWeightCache& cache, const CompressorWeights& c, const int32_t* pos,
                     const float* row_kv, const float* row_score, float* pend_kv,
                     float* pend_score, const RopeTable& rope, double norm_eps,
                     const Numerics& num, float* store) {
  const int64_t p = checked_pos(pos, "compress_at");
  const int r = c.ratio;
  DSV4_CHECK(r > 0, "compress_at: ratio ", r);
  const size_t half = static_cast<size_t>(r) * c.latent();
  const size_t cur = c.overlap ? half : 0;
  copy_to_slot(pend_kv + cur, pos, r, row_kv, c.latent(), "compress_at");
  copy_to_slot(pend_score + cur, pos, r, row_score, c.latent(), "compress_at");
  if ((p + 1) % r != 0) return;
  const int j = static_cast<int>(p / r);
  cpu_compress_blocks(cache, c, pend_kv + cur, pend_score + cur, 1,
                      c.overlap ? pend_kv : nullptr, c.overlap ? pend_score : nullptr, j, rope,
                      norm_eps, num, store + static_cast<int64_t>(j) * c.d);
  if (c.overlap) {  // §6.4 overlap: the completed block becomes the next one's prev
    std::memcpy(pend_kv, pend_kv + half, half * sizeof(float));
    std::memcpy(pend_score, pend_score + half, half * sizeof(float));
  }
}

}  // namespace dsv4
