// Incremental rows of one block: plain decode (MODEL.md §6.2) and the verify round's
// batched program (SPECDECODE.md §3.4) at the StepState positions, plus the round's commit
// (§4.2-§4.4, §4.6).
#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

void Layer::decode(LayerContext& ctx, float* h, float* taps) { step_rows(ctx, 1, false, h, taps); }

void Layer::verify(LayerContext& ctx, int rows, float* h, float* taps) {
  DSV4_CHECK(rows <= cache_.trans_rows, "verify rows ", rows, " > transient rows ",
             cache_.trans_rows);
  step_rows(ctx, rows, true, h, taps);
}

// Issue 12 (a CUDA graph per decode step and per verify round of T rows): every
// position-dependent value is computed on the backend from ws.step, so this issues the same
// op calls with the same arguments at every position, and it changes no host state (a
// replayed graph does not run it). A verify round differs from a plain step only in where
// its window latents go (the round's transient rows, the ring is read-only: SPECDECODE
// §3.4), how its index rows address them (§4.2) and the compressors' checkpoint (§4.3).
void Layer::step_rows(LayerContext& ctx, int rows, bool round, float* h, float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  DSV4_CHECK(ctx.device_step, "decode and verify rows read their positions from the StepState");
  const int32_t* p = ws.step_pos();

  attention_input(ctx, h, rows);
  // From ws.x the window latents, the two compressors' steps and the query are independent
  // until the indexer's top-k and the attention (§6.2 steps 2-6), so they run on lines 1-3
  // beside the query on the main line (issue 12: ~1,400 small ops per step, most waiting on
  // the one before). Writes: line 1 the latents (ws.kv_src and the ring slot, or the
  // transient rows), ws.idx's window, ws.n_visible; line 2 the attention compressor's rows,
  // pending rows, snapshot and store; line 3 the indexer compressor's and ikvc; main ws.qr,
  // ws.q, ws.qi, ws.wi. All read ws.x, written before the fork.
  ops.on_line(1);
  // Step 3: the window latents go where attention reads them (the query sees itself). A
  // plain row is built in a fixed row and copied to the slot of p (§6.3): kv_path's
  // finishing and the copy as one op.
  if (round) {
    kv_path(ctx, rows, cache_.trans_row(0));
  } else {
    float* kv = ws.kv_src.data();
    linear(ctx, w_.wkv, ws.x.data(), 1, kv);
    ops.finish_kv_at(kv, w_.kv_norm, c.head_dim, c.rms_norm_eps, *rope_, p, ctx.num.kv_quant,
                     cache_.kvc.data(), cache_.window);
  }
  const MergedIndex m = decode_index_shape(w_.ratio, cache_.window, c.index_topk, cache_.cap_blocks);
  ops.decode_index(p, rows, w_.ratio, cache_.window, m.tail_width, round ? cache_.trans_base() : -1,
                   ws.idx.data(), cache_.index ? ws.n_visible.data() : nullptr);
  if (cache_.attn) {  // step 6: before the attention, so a block completed here is seen
    ops.on_line(2);
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), rows, ac.rows_kv(), ac.rows_score(), /*gemm=*/false);
    ac.advance_at(ops, p, rows, round, *rope_, c.rms_norm_eps, ctx.num);
  }
  if (cache_.index) {  // step 5's compressor step
    ops.on_line(3);
    CompressorState& ic = *cache_.index;
    ic.project(ops, ws.x.data(), rows, ic.rows_kv(), ic.rows_score(), /*gemm=*/false);
    ic.advance_at(ops, p, rows, round, *rope_, c.rms_norm_eps, ctx.num);
  }
  ops.on_line(0);
  query(ctx, rows);
  if (cache_.index) indexer_query(ctx, rows);  // step 5's q (from ws.qr)
  ops.join_lines();
  if (cache_.index)  // step 5's top-k
    indexer_select(ctx, m, ws.idx.data(), rows, cache_.ikvc.data(), cache_.window);

  attention_back(ctx, cache_.kvc.data(), m, ws.idx.data(), h, rows);
  ffn(ctx, ws.step_token(), rows, h);
  write_taps(ctx, h, rows, taps);
}

void Layer::count_decoded(int64_t pos) { count_rows(pos, 1, false); }

void Layer::count_verified(int64_t pos0, int rows) {
  count_rows(pos0, rows, true);
  const int64_t blocks = w_.ratio > 0 ? (pos0 + rows) / w_.ratio : 0;
  if (cache_.index) DSV4_CHECK(cache_.index->blocks() == blocks, "indexer blocks ", cache_.index->blocks());
  if (cache_.attn) DSV4_CHECK(cache_.attn->blocks() == blocks, "attention blocks ", cache_.attn->blocks());
}

void Layer::count_rows(int64_t pos0, int rows, bool round) {
  if (cache_.index) cache_.index->count_rows(pos0, rows, round);
  if (cache_.attn) cache_.attn->count_rows(pos0, rows, round);
}

void Layer::commit(Ops& ops, int64_t pos0, int n, int rows) {
  cache_.write_ring(ops, pos0, cache_.trans_row(0), n);  // the kept rows' slots, <= 2 copies
  if (n == rows) return;  // the in-place compressor state is already exact
  if (cache_.attn) cache_.attn->rollback(ops, pos0, n);
  if (cache_.index) cache_.index->rollback(ops, pos0, n);
}

}  // namespace dsv4
