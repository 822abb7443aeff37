// A DSpark draft block is a ratio-0, score-routed block (SPECDECODE.md §2.2): it runs
// the trunk layer's own sub-block code with the drafter's attention set (§2.6) and keeps
// a ring of context rows written from main_x at commit (§2.5).
#include "base/error.h"
#include "stage/layer.h"

namespace dsv4 {

void Layer::draft(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, int n_ring,
                  float* h) {
  Workspace& ws = ctx.ws;
  DSV4_CHECK(w_.ratio == 0, "draft block ", w_.layer_id, " has compress ratio ", w_.ratio);
  DSV4_CHECK(rows <= cache_.trans_rows, "draft rows ", rows, " > transient rows ",
             cache_.trans_rows);
  DSV4_CHECK(n_ring >= 0 && n_ring <= cache_.window, "ring slots ", n_ring);
  for (int i = 0; i < rows; ++i) ws.positions[i] = static_cast<int32_t>(pos0 + i);

  attention_front(ctx, h, rows);                  // steps 1-2
  kv_path(ctx, rows, cache_.trans_row(0));        // step 3: transient rows only
  const MergedIndex m = draft_index(n_ring, rows, cache_.trans_base(), ws.idx_host);
  upload_index(ctx, m, rows);                     // step 4
  attention_back(ctx, cache_.kvc.data(), m, ws.idx.data(), h, rows);  // step 5
  ffn(ctx, ids, rows, h);                         // step 6
}

void Layer::write_context_row(LayerContext& ctx, const float* x, int64_t p) {
  DSV4_CHECK(p >= 0, "context row position ", p);
  ctx.ws.positions[0] = static_cast<int32_t>(p);
  ctx.ops.copy(ctx.ws.x.data(), x, static_cast<size_t>(ctx.cfg.hidden_size));
  kv_path(ctx, 1, cache_.ring_row(p));
}

}  // namespace dsv4
