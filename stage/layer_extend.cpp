// A later chunk of a chunked prefill (issue 13): rows [c0, c0 + n) of a prompt whose rows
// [0, c0) are already in the caches. The first chunk is Layer::prefill of rows [0, C);
// each later chunk runs as incremental rows at pos0 = c0 that WRITE the caches as n
// consecutive decode steps would (MODEL.md §6.2, §6.4), so by §6.7 law 2 (prefill row p
// equals decode step p bit for bit on the CPU backend) a chunked prefill leaves the caches
// and logits of the unchunked one.
//
// The ring has only W slots, and a chunk may be longer than W: writing a chunk row's
// latent to its slot p mod W before the attention would overwrite position p - W, which
// rows p' < p of the same chunk still read. So the chunk's own latents go to the layer's
// transient rows (LayerCache, sized max(tmax, chunk rows)) and every row attends them
// with the verify round's addressing (SPECDECODE §4.2: in-chunk positions -> transient
// rows, earlier ones -> the ring, causal by the window law); the ring takes the chunk's
// last min(W, n) latents after the attention. The compressors take the chunk's raw
// projections (in the workspace, not per-layer rows) and leave the pending state decode
// would leave, pooling the chunk's blocks as prefill does (CompressorState::absorb_chunk)
// before the attention that may see them; the causal law is the index's (§4.17, §4.18
// step 5: row p sees the blocks complete at p).
#include <algorithm>

#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

void Layer::extend(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, float* h,
                   float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  const int W = cache_.window;
  DSV4_CHECK(pos0 > 0, "a prefill chunk at position 0 is a prefill");
  DSV4_CHECK(rows <= cache_.trans_rows && rows <= ws.sizes.rows, "prefill chunk of ", rows,
             " rows > transient rows ", cache_.trans_rows, " or workspace rows ",
             ws.sizes.rows);
  for (int i = 0; i < rows; ++i) ws.positions[i] = static_cast<int32_t>(pos0 + i);

  attention_front(ctx, h, rows);
  kv_path(ctx, rows, cache_.trans_row(0));
  const CallIndex& ci = call_index(ctx, pos0, rows);
  const MergedIndex& m = ci.m;

  if (cache_.index) {  // §6.2 step 5 for each row: indexer q, compressor steps, top-k
    CompressorState& ic = *cache_.index;
    indexer_query(ctx, rows);
    ic.project(ops, ws.x.data(), rows, ws.iraw_kv.data(), ws.iraw_score.data(), ctx.gemm);
    ic.absorb_chunk(ops, ws.iraw_kv.data(), ws.iraw_score.data(), pos0, rows, *rope_,
                    c.rms_norm_eps, ctx.num);
    DSV4_CHECK(ic.blocks() == (pos0 + rows) / w_.ratio, "indexer blocks ", ic.blocks());
    indexer_select(ctx, m, ci.idx.data(), rows, cache_.ikvc.data(), W);
  }
  if (cache_.attn) {  // step 6: before the attention, so a block completed here is seen
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), rows, ws.raw_kv.data(), ws.raw_score.data(), ctx.gemm);
    ac.absorb_chunk(ops, ws.raw_kv.data(), ws.raw_score.data(), pos0, rows, *rope_,
                    c.rms_norm_eps, ctx.num);
    DSV4_CHECK(ac.blocks() == (pos0 + rows) / w_.ratio, "attention blocks ", ac.blocks());
  }

  attention_back(ctx, cache_.kvc.data(), m, ci.idx.data(), h, rows);
  // The ring after the chunk: its last min(W, rows) positions, as decode would leave it.
  const int kept = std::min(W, rows);
  cache_.write_ring(ops, pos0 + rows - kept, cache_.trans_row(rows - kept), kept);
  ffn(ctx, ids, rows, h);
  write_last_taps(ctx, h, rows, taps);
}

}  // namespace dsv4
