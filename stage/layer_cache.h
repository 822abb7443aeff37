// Per-layer decode state (MODEL.md §6.1) and the compressor pending-state machine
// (§6.4, §6.6), with the verify-round checkpoint of SPECDECODE.md §4.3.
//
// Layout of one layer's attention KV cache `kvc` [W + cap_blocks + T, D]:
//   rows [0, W)                          window ring, position p at slot p mod W
//   rows [W, W + cap_blocks)             compressed store, block j at row W + j
//   rows [W + cap_blocks, .. + T)        transient rows, never live: a verify round's
//                                        (tmax, drafter only) or a prefill chunk's latents
//                                        (T = max(tmax, chunk rows) with chunked prefill)
// Pending scores hold RAW gate projections; compress_blocks adds ape (one convention
// for prefill seeding, decode and verify, §6.1).
#pragma once
#include <cstdint>
#include <optional>

#include "kernels/ops.h"
#include "model/weights.h"

namespace dsv4 {

// One compressor (attention, or the indexer's) of one layer.
class CompressorState {
 public:
  // store: where block j goes (store + j * w.d); row_cap: rows of one step / round;
  // checkpoint: allocate the verify snapshot (drafter on).
  CompressorState(Ops& ops, const CompressorWeights& w, float* store, int row_cap,
                  bool checkpoint);

  const CompressorWeights& weights() const { return *w_; }
  int blocks() const { return blocks_; }
  int slots() const { return slots_; }
  const float* pending_kv() const { return pend_kv_.data(); }      // [slots, Lc]
  const float* pending_score() const { return pend_score_.data(); }
  float* rows_kv() { return rows_kv_.data(); }                     // [row_cap, Lc]
  float* rows_score() { return rows_score_.data(); }

  // kv 0, score -inf, no blocks (§6.1 initialization, §6.4 "re-initialized").
  void reset(Ops& ops);
  // §6.6 handoff after a prefill of n rows whose raw projections are kv/score [n, Lc].
  void seed_from_prefill(Ops& ops, const float* kv, const float* score, int n);
  // Raw projections (§4.16 step 1, L-island) of x [rows, H] into kv / score [rows, Lc];
  // gemm: a prefill's or extend's rows, as tensor-core GEMMs where the weight allows it
  // (layer_cache.cpp island), never for decode or verify rows (R-I3).
  void project(Ops& ops, const float* x, int rows, float* kv, float* score, bool gemm) const;
  // §6.4 for `rows` consecutive rows at the StepState positions pos [rows] (backend) from
  // rows_kv / rows_score [rows, Lc]: each row to its pending slot, then the block completed
  // there, if any (one Ops::compress_at per row); the same op calls at every position. A
  // verify round (checkpoint) first snapshots the pending pair (SPECDECODE §4.3).
  // Ops only: a replayed step graph does not run it, so the host block count follows in
  // count_rows.
  void advance_at(Ops& ops, const int32_t* pos, int rows, bool checkpoint, const RopeTable& rope,
                  double norm_eps, const Numerics& num);
  // The host side of advance_at of the rows at p0 .. p0+rows-1, after the step: with
  // checkpoint the round's snapshot count, then the block count.
  void count_rows(int64_t p0, int rows, bool checkpoint);
  // A prefill chunk (Layer::extend): the live state `rows` decode steps at pos0.. would
  // leave, from the chunk's raw projections kv / score [rows, Lc] (stage workspace), with
  // its blocks pooled in two compress_blocks calls instead of one per block (§6.6).
  void absorb_chunk(Ops& ops, const float* kv, const float* score, int64_t pos0, int rows,
                    const RopeTable& rope, double norm_eps, const Numerics& num);
  // SPECDECODE §4.3 rollback: restore the snapshot and replay the first n rows of the
  // round opened at pos0 (rows, shifts, counts; never re-pools).
  void rollback(Ops& ops, int64_t pos0, int n);
  // LayerCache::fill_for_benchmark's part: pending rows seeded, blocks = pos / ratio.
  void fill_for_benchmark(Ops& ops, int64_t pos, uint64_t seed);

 private:
  int slot_of(int64_t p) const;
  void write_row(Ops& ops, int64_t p, int i);   // rows_*[i] -> pending slot of p
  void shift(Ops& ops);                         // overlap: cur -> prev

  const CompressorWeights* w_;
  int ratio_, latent_, slots_;
  float* store_;
  FBuf pend_kv_, pend_score_;   // [slots, Lc]
  FBuf rows_kv_, rows_score_;   // [row_cap, Lc]
  FBuf snap_kv_, snap_score_;   // [slots, Lc] (checkpoint only)
  int blocks_ = 0, blocks0_ = 0;
};

struct LayerCache {
  // W ring rows, cap_blocks = max_seq / ratio store rows (0 for ratio 0), tmax verify
  // transient rows (0 without the drafter: no compressor checkpoint), chunk_rows
  // transient rows of a prefill chunk (0: unchunked prefill). row_cap = rows of one
  // step / round.
  LayerCache(Ops& ops, const BlockWeights& b, int window, int64_t max_seq, int head_dim,
             int tmax, int row_cap, int chunk_rows);

  int window = 0, cap_blocks = 0, trans_rows = 0, head_dim = 0;
  FBuf kvc;                              // [W + cap_blocks + trans_rows, D]
  FBuf ikvc;                             // [cap_blocks, Id] indexer store (ratio 4)
  std::optional<CompressorState> attn;   // ratio != 0
  std::optional<CompressorState> index;  // ratio == 4

  int trans_base() const { return window + cap_blocks; }
  float* ring_row(int64_t p) const { return kvc.data() + (p % window) * head_dim; }
  float* store_rows() const { return kvc.data() + static_cast<int64_t>(window) * head_dim; }
  float* trans_row(int i) const {
    return kvc.data() + static_cast<int64_t>(trans_base() + i) * head_dim;
  }
  // Ring slots of positions first .. first+n-1 (n <= W) from rows src [n, D], in at most
  // two copies (the slots wrap once).
  void write_ring(Ops& ops, int64_t first, const float* src, int n) const;
  void reset(Ops& ops);
  // Benchmarks only (bench/decode_bench.cpp): the state after `pos` positions with
  // generated contents instead of a prefill: ring and stores full of seeded values in
  // [-1, 1), the compressors' block counts at pos / ratio, their pending rows seeded.
  // The work of the next step is then that of position pos; its values mean nothing.
  void fill_for_benchmark(Ops& ops, int64_t pos, uint64_t seed);
};

}  // namespace dsv4
