// Prefill of one block from position 0 and the prefill -> decode handoff (MODEL.md §5,
// §4.16-§4.19, §6.6).
#include <algorithm>

#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

void Layer::prefill(LayerContext& ctx, const int32_t* ids, int s, float* h, float* taps) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  const int W = cache_.window, D = c.head_dim;
  DSV4_CHECK(s <= ws.sizes.rows, "prefill rows ", s, " > workspace rows ", ws.sizes.rows);
  for (int t = 0; t < s; ++t) ws.positions[t] = t;

  attention_front(ctx, h, s);
  float* src = ws.kv_src.data();  // [s + nb, D]: window latents, then compressed blocks
  kv_path(ctx, s, src);
  const CallIndex& ci = call_index(ctx, 0, s);
  const MergedIndex& m = ci.m;

  if (cache_.index) {  // §4.18: indexer keys go straight to the indexer store
    CompressorState& ic = *cache_.index;
    indexer_query(ctx, s);
    ic.project(ops, ws.x.data(), s, ws.iraw_kv.data(), ws.iraw_score.data(), ctx.gemm);
    const int nb = s / w_.ratio;
    if (nb > 0)
      ops.compress_blocks(ic.weights(), ws.iraw_kv.data(), ws.iraw_score.data(), nb, nullptr,
                          nullptr, 0, *rope_, c.rms_norm_eps, ctx.num, cache_.ikvc.data());
    indexer_select(ctx, m, ci.idx.data(), s, cache_.ikvc.data(), s);
    ic.seed_from_prefill(ops, ws.iraw_kv.data(), ws.iraw_score.data(), s);
  }
  if (cache_.attn) {  // §4.16: blocks to the store, then appended to the KV source
    CompressorState& ac = *cache_.attn;
    ac.project(ops, ws.x.data(), s, ws.raw_kv.data(), ws.raw_score.data(), ctx.gemm);
    const int nb = s / w_.ratio;
    if (nb > 0) {
      ops.compress_blocks(ac.weights(), ws.raw_kv.data(), ws.raw_score.data(), nb, nullptr,
                          nullptr, 0, *rope_, c.rms_norm_eps, ctx.num, cache_.store_rows());
      ops.copy(src + static_cast<int64_t>(s) * D, cache_.store_rows(),
               static_cast<size_t>(nb) * D);
    }
    ac.seed_from_prefill(ops, ws.raw_kv.data(), ws.raw_score.data(), s);
  }
  // §6.6 ring: positions [max(0, s-W), s) to slots p mod W.
  const int first = std::max(0, s - W);
  cache_.write_ring(ops, first, src + static_cast<int64_t>(first) * D, s - first);

  attention_back(ctx, src, m, ci.idx.data(), h, s);
  ffn(ctx, ids, s, h);
  write_last_taps(ctx, h, s, taps);
}

}  // namespace dsv4
