// Incremental rows of one block: plain decode (MODEL.md §6.2) at the StepState position
// and the verify round's batched program (SPECDECODE.md §3.4), plus the round's commit
// (§4.2-§4.4, §4.6).
#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

// Issue 12 (a CUDA graph per decode step): every position-dependent value is computed on
// the backend from ws.step, so this issues the same op calls with the same arguments at
// every position, and it changes no host state (a replayed graph does not run it).
void Layer::decode(LayerContext& ctx, float* h, float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  DSV4_CHECK(ctx.device_step, "plain decode reads its position from the StepState");
  const int32_t* p = ws.step_pos();

  attention_input(ctx, h, 1);
  // From ws.x the window latent, the two compressors' steps and the query are independent
  // until the indexer's top-k and the attention (§6.2 steps 2-6), so they run on lines 1-3
  // beside the query on the main line (issue 12: ~1,400 small ops per step, most waiting on
  // the one before). Writes: line 1 kv, the ring slot, ws.idx's window, ws.n_visible; line 2
  // the attention compressor's rows, pending rows and store; line 3 the indexer compressor's
  // and ikvc; main ws.qr, ws.q, ws.qi, ws.wi. All read ws.x, written before the fork.
  ops.on_line(1);
  // Step 3: the window latent goes to its ring slot before attention (the query sees
  // itself); it is built in a fixed row and copied to the slot of p (§6.3): kv_path's
  // finishing and the copy as one op.
  float* kv = ws.kv_src.data();
  linear(ctx, w_.wkv, ws.x.data(), 1, kv);
  ops.finish_kv_at(kv, w_.kv_norm, c.head_dim, c.rms_norm_eps, *rope_, p, ctx.num.kv_quant,
                   cache_.kvc.data(), cache_.window);
  const MergedIndex m = decode_index_shape(w_.ratio, cache_.window, c.index_topk, cache_.cap_blocks);
  ops.decode_index(p, w_.ratio, cache_.window, m.tail_width, ws.idx.data(),
                   cache_.index ? ws.n_visible.data() : nullptr);
  if (cache_.attn) {  // step 6: before the attention, so a block completed here is seen
    ops.on_line(2);
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), 1, ac.rows_kv(), ac.rows_score(), /*gemm=*/false);
    ac.advance_at(ops, p, *rope_, c.rms_norm_eps, ctx.num);
  }
  if (cache_.index) {  // step 5's compressor step
    ops.on_line(3);
    CompressorState& ic = *cache_.index;
    ic.project(ops, ws.x.data(), 1, ic.rows_kv(), ic.rows_score(), /*gemm=*/false);
    ic.advance_at(ops, p, *rope_, c.rms_norm_eps, ctx.num);
  }
  ops.on_line(0);
  query(ctx, 1);
  if (cache_.index) indexer_query(ctx, 1);  // step 5's q (from ws.qr)
  ops.join_lines();
  if (cache_.index) indexer_select(ctx, m, 1, cache_.ikvc.data(), cache_.window);  // step 5's top-k

  attention_back(ctx, cache_.kvc.data(), m, h, 1);
  ffn(ctx, ws.step_token(), 1, h);
  write_taps(ctx, h, 1, taps);
}

void Layer::count_decoded(int64_t pos) {
  if (cache_.index) cache_.index->count_decoded(pos);
  if (cache_.attn) cache_.attn->count_decoded(pos);
}

void Layer::verify(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, float* h,
                   float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  DSV4_CHECK(rows <= cache_.trans_rows, "verify rows ", rows, " > transient rows ",
             cache_.trans_rows);
  for (int i = 0; i < rows; ++i) ws.positions[i] = static_cast<int32_t>(pos0 + i);

  attention_front(ctx, h, rows);
  // Step 3: the window latents go to the round's transient rows (the ring is read-only).
  kv_path(ctx, rows, cache_.trans_row(0));
  const MergedIndex m = step_index(w_.ratio, pos0, rows, cache_.window, c.index_topk,
                                   cache_.trans_base(), ws.idx_host);
  upload_index(ctx, m, rows);

  if (cache_.index) {  // step 5: indexer q, compressor steps, then top-k
    CompressorState& ic = *cache_.index;
    indexer_query(ctx, rows);
    ic.project(ops, ws.x.data(), rows, ic.rows_kv(), ic.rows_score(), /*gemm=*/false);
    ic.advance(ops, pos0, rows, *rope_, c.rms_norm_eps, ctx.num);
    DSV4_CHECK(ic.blocks() == (pos0 + rows) / w_.ratio, "indexer blocks ", ic.blocks());
    indexer_select(ctx, m, rows, cache_.ikvc.data(), cache_.window);
  }
  if (cache_.attn) {  // step 6: before the attention, so a block completed here is seen
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), rows, ac.rows_kv(), ac.rows_score(), /*gemm=*/false);
    ac.advance(ops, pos0, rows, *rope_, c.rms_norm_eps, ctx.num);
    DSV4_CHECK(ac.blocks() == (pos0 + rows) / w_.ratio, "attention blocks ", ac.blocks());
  }

  attention_back(ctx, cache_.kvc.data(), m, h, rows);
  ffn(ctx, ids, rows, h);
  write_taps(ctx, h, rows, taps);
}

void Layer::commit(Ops& ops, int64_t pos0, int n, int rows) {
  for (int j = 0; j < n; ++j)
    ops.copy(cache_.ring_row(pos0 + j), cache_.trans_row(j), cache_.head_dim);
  if (n == rows) return;  // the in-place compressor state is already exact
  if (cache_.attn) cache_.attn->rollback(ops, pos0, n);
  if (cache_.index) cache_.index->rollback(ops, pos0, n);
}

}  // namespace dsv4
