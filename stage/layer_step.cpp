// Incremental rows of one block: plain decode (MODEL.md §6.2) and the verify round's
// batched program (SPECDECODE.md §3.4), plus the round's commit (§4.2-§4.4, §4.6).
#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

void Layer::step(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, bool verify,
                 float* h, float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  DSV4_CHECK(verify || rows == 1, "plain decode takes one row, got ", rows);
  DSV4_CHECK(!verify || rows <= cache_.trans_rows, "verify rows ", rows, " > transient rows ",
             cache_.trans_rows);
  for (int i = 0; i < rows; ++i) ws.positions[i] = static_cast<int32_t>(pos0 + i);

  attention_front(ctx, h, rows);
  // Step 3: the window latent goes to the ring slot (decode, before attention so the
  // query sees itself) or to the round's transient rows (verify; the ring is read-only).
  kv_path(ctx, rows, verify ? cache_.trans_row(0) : cache_.ring_row(pos0));
  const MergedIndex m = step_index(w_.ratio, pos0, rows, cache_.window, c.index_topk,
                                   verify ? cache_.trans_base() : -1, ws.idx_host);
  upload_index(ctx, m, rows);

  if (cache_.index) {  // step 5: indexer q, compressor step(s), then top-k
    CompressorState& ic = *cache_.index;
    indexer_query(ctx, rows);
    ic.project(ops, ws.x.data(), rows, ic.rows_kv(), ic.rows_score());
    ic.advance(ops, pos0, rows, *rope_, c.rms_norm_eps, ctx.num, verify);
    DSV4_CHECK(ic.blocks() == (pos0 + rows) / w_.ratio, "indexer blocks ", ic.blocks());
    indexer_select(ctx, m, rows, cache_.ikvc.data(), cache_.window);
  }
  if (cache_.attn) {  // step 6: before the attention, so a block completed here is seen
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), rows, ac.rows_kv(), ac.rows_score());
    ac.advance(ops, pos0, rows, *rope_, c.rms_norm_eps, ctx.num, verify);
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
