#include "stage/workspace.h"

#include <algorithm>

#include "base/error.h"

namespace dsv4 {

Workspace::Workspace(Ops& ops, const ModelConfig& c, const WorkspaceSizes& sz) : sizes(sz) {
  const size_t r = sz.rows;
  const size_t hidden = c.hidden_size, hc = c.hc_mult;
  const size_t heads_dim = static_cast<size_t>(c.num_attention_heads) * c.head_dim;
  y = ops.alloc(r * hidden);
  x = ops.alloc(r * hidden);
  post = ops.alloc(r * hc);
  comb = ops.alloc(r * hc * hc);
  h_mid = ops.alloc(r * hc * hidden);
  qr = ops.alloc(r * c.q_lora_rank);
  q = ops.alloc(r * heads_dim);
  o = ops.alloc(r * heads_dim);
  og = ops.alloc(r * c.o_groups * c.o_lora_rank);
  a = ops.alloc(r * hidden);
  kv_src = ops.alloc((r + sz.max_blocks) * c.head_dim);
  if (sz.cmp_latent > 0) {
    raw_kv = ops.alloc(r * sz.cmp_latent);
    raw_score = ops.alloc(r * sz.cmp_latent);
  }
  if (sz.idx_latent > 0) {
    iraw_kv = ops.alloc(r * sz.idx_latent);
    iraw_score = ops.alloc(r * sz.idx_latent);
    qi = ops.alloc(r * c.index_n_heads * c.index_head_dim);
    wi = ops.alloc(r * c.index_n_heads);
  }
  wt = ops.alloc(r * c.num_experts_per_tok);
  moe_out = ops.alloc(r * hidden);
  idx = ops.alloc_i32(r * sz.index_width);
  sel = ops.alloc_i32(r * c.num_experts_per_tok);
  step = ops.alloc_i32(2 * static_cast<size_t>(sz.step_rows));
  n_visible = ops.alloc_i32(sz.step_rows);
  for (const int ratio : c.compress_ratios)
    if (std::none_of(call_index.begin(), call_index.end(),
                     [ratio](const CallIndex& ci) { return ci.ratio == ratio; })) {
      call_index.emplace_back();
      call_index.back().ratio = ratio;
      const size_t width = ratio == 0 ? c.sliding_window : sz.index_width;  // ratio 0: the window alone
      call_index.back().idx = ops.alloc_i32(r * width);
    }
  idx_host.reserve(r * sz.index_width);
  positions.resize(r);
  step_host.resize(step.size());
}

void Workspace::upload_step(Ops& ops, int64_t pos0, const int32_t* tokens, int rows) {
  DSV4_CHECK(rows >= 1 && rows <= sizes.step_rows, "step of ", rows, " rows outside [1, ",
             sizes.step_rows, "]");
  for (int t = 0; t < rows; ++t) {
    step_host[t] = static_cast<int32_t>(pos0 + t);
    step_host[sizes.step_rows + t] = tokens[t];
  }
  ops.upload_i32(step.data(), step_host.data(), step_host.size());
}

uint64_t Workspace::bytes() const {
  uint64_t n = 0;
  for (const FBuf* b : {&y, &x, &post, &comb, &h_mid, &qr, &q, &o, &og, &a, &kv_src, &raw_kv,
                        &raw_score, &iraw_kv, &iraw_score, &qi, &wi, &wt, &moe_out})
    n += b->size() * sizeof(float);
  for (const CallIndex& ci : call_index) n += ci.idx.size() * sizeof(int32_t);
  return n + (idx.size() + sel.size() + step.size() + n_visible.size()) * sizeof(int32_t);
}

}  // namespace dsv4
