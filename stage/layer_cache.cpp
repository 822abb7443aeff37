// MODEL.md §6.1, §6.4, §6.6; SPECDECODE.md §4.3.
#include "stage/layer_cache.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace dsv4 {

CompressorState::CompressorState(Ops& ops, const CompressorWeights& w, float* store,
                                 int row_cap, bool checkpoint)
    : w_(&w),
      ratio_(w.ratio),
      latent_(w.latent()),
      slots_(w.overlap ? 2 * w.ratio : w.ratio),
      store_(store) {
  const size_t pend = static_cast<size_t>(slots_) * latent_;
  pend_kv_ = ops.alloc(pend);
  pend_score_ = ops.alloc(pend);
  rows_kv_ = ops.alloc(static_cast<size_t>(row_cap) * latent_);
  rows_score_ = ops.alloc(static_cast<size_t>(row_cap) * latent_);
  if (checkpoint) {
    snap_kv_ = ops.alloc(pend);
    snap_score_ = ops.alloc(pend);
  }
  reset(ops);
}

void CompressorState::reset(Ops& ops) {
  const size_t pend = static_cast<size_t>(slots_) * latent_;
  ops.fill(pend_kv_.data(), 0.0f, pend);
  ops.fill(pend_score_.data(), -std::numeric_limits<float>::infinity(), pend);
  blocks_ = blocks0_ = 0;
}

int CompressorState::slot_of(int64_t p) const {
  const int in_block = static_cast<int>(p % ratio_);
  return w_->overlap ? ratio_ + in_block : in_block;
}

void CompressorState::write_row(Ops& ops, int64_t p, int i) {
  const size_t off = static_cast<size_t>(slot_of(p)) * latent_;
  const size_t src = static_cast<size_t>(i) * latent_;
  ops.copy(pend_kv_.data() + off, rows_kv_.data() + src, latent_);
  ops.copy(pend_score_.data() + off, rows_score_.data() + src, latent_);
}

void CompressorState::shift(Ops& ops) {
  const size_t half = static_cast<size_t>(ratio_) * latent_;
  ops.copy(pend_kv_.data(), pend_kv_.data() + half, half);
  ops.copy(pend_score_.data(), pend_score_.data() + half, half);
}

void CompressorState::seed_from_prefill(Ops& ops, const float* kv, const float* score,
                                        int n) {
  const int cutoff = ratio_ * (n / ratio_);
  const int rem = n - cutoff;
  const size_t row = latent_;
  const size_t block = static_cast<size_t>(ratio_) * row;
  // Overlap: prev <- the last complete block, cur <- the remainder; non-overlap: the
  // remainder goes to rows [0, rem).
  if (w_->overlap && cutoff >= ratio_) {
    ops.copy(pend_kv_.data(), kv + (cutoff - ratio_) * row, block);
    ops.copy(pend_score_.data(), score + (cutoff - ratio_) * row, block);
  }
  if (rem > 0) {
    const size_t dst = w_->overlap ? block : 0;
    ops.copy(pend_kv_.data() + dst, kv + cutoff * row, rem * row);
    ops.copy(pend_score_.data() + dst, score + cutoff * row, rem * row);
  }
  blocks_ = n / ratio_;
}

namespace {

// §4.16 step 1 (L-island); a prefill's rows (gemm, issue 13) by linear_island_gemm.
void island(Ops& ops, const TensorView& w, const float* x, int rows, bool gemm, float* y) {
  if (gemm) ops.linear_island_gemm(w, x, rows, y);
  else ops.linear_island(w, x, rows, y);
}

}  // namespace

void CompressorState::project(Ops& ops, const float* x, int rows, float* kv, float* score,
                              bool gemm) const {
  island(ops, w_->wkv, x, rows, gemm, kv);
  island(ops, w_->wgate, x, rows, gemm, score);
}

void CompressorState::advance_at(Ops& ops, const int32_t* pos, int rows, bool checkpoint,
                                 const RopeTable& rope, double norm_eps, const Numerics& num) {
  if (checkpoint) {
    const size_t pend = static_cast<size_t>(slots_) * latent_;
    DSV4_CHECK(snap_kv_.data() != nullptr, "verify round without a checkpoint buffer");
    ops.copy(snap_kv_.data(), pend_kv_.data(), pend);
    ops.copy(snap_score_.data(), pend_score_.data(), pend);
  }
  for (int i = 0; i < rows; ++i) {
    const size_t row = static_cast<size_t>(i) * latent_;
    ops.compress_at(*w_, pos + i, rows_kv_.data() + row, rows_score_.data() + row, pend_kv_.data(),
                    pend_score_.data(), rope, norm_eps, num, store_);
  }
}

void CompressorState::count_rows(int64_t p0, int rows, bool checkpoint) {
  if (checkpoint) blocks0_ = blocks_;
  for (int64_t p = p0; p < p0 + rows; ++p) {
    if ((p + 1) % ratio_ != 0) continue;
    DSV4_CHECK(blocks_ == p / ratio_, "compressor blocks ", blocks_, " != emitted block ", p / ratio_);
    ++blocks_;
  }
}

void CompressorState::absorb_chunk(Ops& ops, const float* kv, const float* score, int64_t pos0,
                                   int rows, const RopeTable& rope, double norm_eps,
                                   const Numerics& num) {
  const size_t lc = latent_;
  const size_t cur = w_->overlap ? static_cast<size_t>(ratio_) * lc : 0;  // current block
  float* const prev_kv = w_->overlap ? pend_kv_.data() : nullptr;
  float* const prev_score = w_->overlap ? pend_score_.data() : nullptr;
  // The pending block takes the chunk's first rows; complete, it is pooled as decode
  // pools it (prev = the pending previous block).
  const int rem0 = static_cast<int>(pos0 % ratio_);
  const int fill = std::min(rows, ratio_ - rem0);
  ops.copy(pend_kv_.data() + cur + rem0 * lc, kv, fill * lc);
  ops.copy(pend_score_.data() + cur + rem0 * lc, score, fill * lc);
  if (rem0 + fill < ratio_) return;
  const int j0 = static_cast<int>(pos0 / ratio_);
  DSV4_CHECK(blocks_ == j0, "compressor blocks ", blocks_, " != emitted block ", j0);
  ops.compress_blocks(*w_, pend_kv_.data() + cur, pend_score_.data() + cur, 1, prev_kv,
                      prev_score, j0, rope, norm_eps, num,
                      store_ + static_cast<int64_t>(j0) * w_->d);
  // The blocks wholly inside the chunk in one call, as prefill pools them; the first one's
  // prev is block j0 (still the pending current block).
  const int nb = (rows - fill) / ratio_;
  if (nb > 0)
    ops.compress_blocks(*w_, kv + fill * lc, score + fill * lc, nb,
                        w_->overlap ? pend_kv_.data() + cur : nullptr,
                        w_->overlap ? pend_score_.data() + cur : nullptr, j0 + 1, rope,
                        norm_eps, num, store_ + static_cast<int64_t>(j0 + 1) * w_->d);
  blocks_ = j0 + 1 + nb;
  // §6.6 seeding from the chunk's tail: prev <- the last complete block, cur <- the rest.
  const int tail = fill + nb * ratio_;  // first row of the incomplete block
  if (w_->overlap && nb > 0) {
    ops.copy(pend_kv_.data(), kv + (tail - ratio_) * lc, ratio_ * lc);
    ops.copy(pend_score_.data(), score + (tail - ratio_) * lc, ratio_ * lc);
  } else if (w_->overlap) {
    shift(ops);
  }
  if (rows > tail) {
    ops.copy(pend_kv_.data() + cur, kv + tail * lc, (rows - tail) * lc);
    ops.copy(pend_score_.data() + cur, score + tail * lc, (rows - tail) * lc);
  }
}

void CompressorState::rollback(Ops& ops, int64_t pos0, int n) {
  const size_t pend = static_cast<size_t>(slots_) * latent_;
  ops.copy(pend_kv_.data(), snap_kv_.data(), pend);
  ops.copy(pend_score_.data(), snap_score_.data(), pend);
  blocks_ = blocks0_;
  for (int i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    write_row(ops, p, i);
    if ((p + 1) % ratio_ != 0) continue;
    if (w_->overlap) shift(ops);
    ++blocks_;
  }
}

LayerCache::LayerCache(Ops& ops, const BlockWeights& b, int window_, int64_t max_seq,
                       int head_dim_, int tmax, int row_cap, int chunk_rows)
    : window(window_),
      cap_blocks(b.ratio > 0 ? static_cast<int>(max_seq / b.ratio) : 0),
      trans_rows(std::max(tmax, chunk_rows)),
      head_dim(head_dim_) {
  kvc = ops.alloc(static_cast<size_t>(window + cap_blocks + trans_rows) * head_dim);
  if (b.compressor) {
    attn.emplace(ops, *b.compressor, store_rows(), row_cap, tmax > 0);
  }
  if (b.indexer) {
    const CompressorWeights& ic = b.indexer->compressor;
    ikvc = ops.alloc(static_cast<size_t>(cap_blocks) * ic.d);
    index.emplace(ops, ic, ikvc.data(), row_cap, tmax > 0);
  }
}

void LayerCache::write_ring(Ops& ops, int64_t first, const float* src, int n) const {
  DSV4_CHECK(n <= window, "ring write of ", n, " rows > window ", window);
  const int slot = static_cast<int>(first % window);
  const int head = std::min(n, window - slot);  // slots [slot, slot + head), then [0, n - head)
  ops.copy(ring_row(first), src, static_cast<size_t>(head) * head_dim);
  if (n > head)
    ops.copy(kvc.data(), src + static_cast<size_t>(head) * head_dim,
             static_cast<size_t>(n - head) * head_dim);
}

void LayerCache::reset(Ops& ops) {
  ops.fill(kvc.data(), 0.0f, kvc.size());
  if (ikvc.data()) ops.fill(ikvc.data(), 0.0f, ikvc.size());
  if (attn) attn->reset(ops);
  if (index) index->reset(ops);
}

}  // namespace dsv4
