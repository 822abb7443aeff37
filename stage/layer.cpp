// The pieces of a block shared by prefill and incremental rows (MODEL.md §4.13-§4.24,
// §5), and its construction.
#include "stage/layer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"

namespace dsv4 {
namespace {

void prepare_fp8(Ops& ops, const Fp8Linear& l) {
  ops.prepare(l.weight);
  ops.prepare(l.scale);
}

void prepare_compressor(Ops& ops, const CompressorWeights& c) {
  for (const TensorView* t : {&c.wkv, &c.wgate, &c.ape, &c.norm}) ops.prepare(*t);
}

}  // namespace

void prepare_block(Ops& ops, const BlockWeights& b) {
  for (const HcParams* p : {&b.hc_attn, &b.hc_ffn}) {
    ops.prepare(p->fn);
    ops.prepare(p->base);
    ops.prepare(p->scale);
  }
  for (const TensorView* t : {&b.attn_norm, &b.ffn_norm, &b.q_norm, &b.kv_norm, &b.attn_sink,
                              &b.gate_weight})
    ops.prepare(*t);
  for (const Fp8Linear* l : {&b.wq_a, &b.wq_b, &b.wkv, &b.wo_a, &b.wo_b, &b.shared_w1,
                             &b.shared_w2, &b.shared_w3})
    prepare_fp8(ops, *l);
  if (b.compressor) prepare_compressor(ops, *b.compressor);
  if (b.indexer) {
    prepare_fp8(ops, b.indexer->wq_b);
    ops.prepare(b.indexer->weights_proj);
    prepare_compressor(ops, b.indexer->compressor);
  }
  if (b.gate_bias) ops.prepare(*b.gate_bias);
  for (const ExpertWeights& e : b.experts)
    for (const Fp4Linear* l : {&e.w1, &e.w2, &e.w3}) {
      ops.prepare(l->weight);
      ops.prepare(l->scale);
    }
}

Layer::Layer(Ops& ops, BlockWeights w, const ModelConfig& cfg, const RopeTable& rope,
             int64_t max_seq, int trans_rows, int row_cap, int tap_col, int chunk_rows)
    : w_(std::move(w)),
      rope_(&rope),
      cache_(ops, w_, cfg.sliding_window, max_seq, cfg.head_dim, trans_rows, row_cap,
             chunk_rows),
      tap_col_(tap_col) {
  prepare_block(ops, w_);
}

void Layer::linear(LayerContext& ctx, const Fp8Linear& w, const float* x, int rows, float* y) {
  if (ctx.gemm) ctx.ops.linear_fp8_gemm(w, x, rows, ctx.num.act_bf16(), y);
  else ctx.ops.linear_fp8(w, x, rows, ctx.num.act_bf16(), y);
}

void Layer::linear(LayerContext& ctx, const TensorView& w, const float* x, int rows, float* y) {
  if (ctx.gemm) ctx.ops.linear_bf16_gemm(w, x, rows, ctx.num.act_bf16(), y);
  else ctx.ops.linear_bf16(w, x, rows, ctx.num.act_bf16(), y);
}

void Layer::rope_rows(LayerContext& ctx, float* v, int rows, int heads, int dim, bool inverse) {
  if (ctx.device_step)
    ctx.ops.rope_dev(v, rows, heads, dim, *rope_, ctx.ws.step_pos(), inverse);
  else
    ctx.ops.rope(v, rows, heads, dim, *rope_, ctx.ws.positions.data(), inverse);
}

// §5 lines 1-2 and §4.13: hc_pre (attn), attn_norm -> ws.x; q path -> ws.qr, ws.q.
void Layer::attention_front(LayerContext& ctx, const float* h, int rows) {
  attention_input(ctx, h, rows);
  query(ctx, rows);
}

// §5 lines 1-2: hc_pre (attn) and attn_norm -> ws.x (ws.y, ws.post, ws.comb); a decode
// step's as one op (issue 12: fewer launches per step).
void Layer::attention_input(LayerContext& ctx, const float* h, int rows) {
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  if (ctx.device_step) {
    ctx.ops.hc_pre_norm(h, rows, c.hc_mult, c.hidden_size, w_.hc_attn, c.rms_norm_eps, c.hc_eps,
                        c.hc_sinkhorn_iters, w_.attn_norm, ws.y.data(), ws.post.data(),
                        ws.comb.data(), ws.x.data());
    return;
  }
  ctx.ops.hc_pre(h, rows, c.hc_mult, c.hidden_size, w_.hc_attn, c.rms_norm_eps, c.hc_eps,
                 c.hc_sinkhorn_iters, ws.y.data(), ws.post.data(), ws.comb.data());
  ctx.ops.rmsnorm(ws.y.data(), w_.attn_norm, rows, c.hidden_size, c.rms_norm_eps, ws.x.data());
}

// §4.13: the q path from ws.x -> ws.qr (normed), ws.q (per-head normed, roped).
void Layer::query(LayerContext& ctx, int rows) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  linear(ctx, w_.wq_a, ws.x.data(), rows, ws.qr.data());                      // [rows, Qr]
  ops.rmsnorm(ws.qr.data(), w_.q_norm, rows, c.q_lora_rank, c.rms_norm_eps, ws.qr.data());
  linear(ctx, w_.wq_b, ws.qr.data(), rows, ws.q.data());                      // [rows, nh, D]
  // head_rms then rope as one op (issue 12: fewer launches per step; issue 13: one pass
  // over a prefill's q).
  if (ctx.device_step)
    ops.head_rms_rope_dev(ws.q.data(), rows, c.num_attention_heads, c.head_dim, c.rms_norm_eps,
                          *rope_, ws.step_pos());
  else
    ops.head_rms_rope(ws.q.data(), rows, c.num_attention_heads, c.head_dim, c.rms_norm_eps,
                      *rope_, ws.positions.data());
}

// §4.14: kv [rows, D] = act_quant(rope(RMSNorm(x wkv^T, kv_norm))).
void Layer::kv_path(LayerContext& ctx, int rows, float* kv) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  linear(ctx, w_.wkv, ctx.ws.x.data(), rows, kv);
  if (!ctx.device_step) {  // the three ops below as one (issue 13)
    ops.finish_kv(kv, w_.kv_norm, rows, c.head_dim, c.rms_norm_eps, *rope_, ctx.ws.positions.data(),
                  ctx.num.kv_quant);
    return;
  }
  ops.rmsnorm(kv, w_.kv_norm, rows, c.head_dim, c.rms_norm_eps, kv);
  rope_rows(ctx, kv, rows, 1, c.head_dim, false);
  ops.kv_act_quant(kv, rows, c.head_dim, c.qk_rope_head_dim, ctx.num.kv_quant);
}

// §4.18 steps 1 and 3: qI [rows, Ih, Id] (rope, Hadamard + FP4), raw weights [rows, Ih].
void Layer::indexer_query(LayerContext& ctx, int rows) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  linear(ctx, w_.indexer->wq_b, ws.qr.data(), rows, ws.qi.data());
  // §4.18 step 1: rope, then Hadamard and FP4 QAT; indexer_quant none skips both (MODEL.md
  // numeric options: the rotation is orthogonal, so scores keep their exact value). A decode
  // step ropes and rotates in one op (issue 12).
  const bool fp4 = ctx.num.indexer_quant == IndexerQuant::fp4;
  if (ctx.device_step && fp4) {
    ops.rope_hadamard_fp4_dev(ws.qi.data(), rows, c.index_n_heads, c.index_head_dim, *rope_,
                              ws.step_pos());
  } else {
    rope_rows(ctx, ws.qi.data(), rows, c.index_n_heads, c.index_head_dim, false);
    if (fp4) ops.hadamard_fp4(ws.qi.data(), rows * c.index_n_heads, c.index_head_dim, true);
  }
  linear(ctx, w_.indexer->weights_proj, ws.x.data(), rows, ws.wi.data());
}

void Layer::upload_index(LayerContext& ctx, const MergedIndex& m, int rows) {
  DSV4_CHECK(static_cast<size_t>(rows) * m.width <= ctx.ws.idx.size(), "index rows ", rows,
             " x ", m.width, " exceed the workspace");
  ctx.ops.upload_i32(ctx.ws.idx.data(), ctx.ws.idx_host.data(),
                     static_cast<size_t>(rows) * m.width);
}

// The rows hold the call's until another call of the class: besides the upload only
// indexer_topk writes them, and it rewrites every tail column of every row (kernels/ops.def),
// so each layer of the class finds the window part uploaded and writes its own top-k.
const CallIndex& Layer::call_index(LayerContext& ctx, int64_t pos0, int rows) {
  Workspace& ws = ctx.ws;
  const auto ci = std::find_if(ws.call_index.begin(), ws.call_index.end(),
                               [this](const CallIndex& c) { return c.ratio == w_.ratio; });
  DSV4_CHECK(ci != ws.call_index.end(), "layer ", w_.layer_id, ": no index rows for ratio ",
             w_.ratio);
  const int64_t trans_base = cache_.trans_base();
  if (ci->pos0 == pos0 && ci->rows == rows && ci->trans_base == trans_base) return *ci;
  const int W = cache_.window, topk = ctx.cfg.index_topk;
  ci->pos0 = -1;  // until the upload below is issued
  ci->m = pos0 == 0 ? prefill_index(w_.ratio, rows, W, topk, ws.idx_host)
                    : step_index(w_.ratio, pos0, rows, W, topk, trans_base, ws.idx_host);
  DSV4_CHECK(static_cast<size_t>(rows) * ci->m.width <= ci->idx.size(), "index rows ", rows,
             " x ", ci->m.width, " exceed the workspace");
  ctx.ops.upload_i32(ci->idx.data(), ws.idx_host.data(), static_cast<size_t>(rows) * ci->m.width);
  ci->pos0 = pos0;
  ci->rows = rows;
  ci->trans_base = trans_base;
  return *ci;
}

// §4.18 steps 4-7 / §6.5: top-k of the visible indexer keys into the compressed columns.
void Layer::indexer_select(LayerContext& ctx, const MergedIndex& m, int32_t* idx, int rows,
                           const float* keys, int index_base) {
  if (m.tail_width == 0) return;
  const ModelConfig& c = ctx.cfg;
  // D7: wscale = fl32(Id^-0.5 * Ih^-0.5), applied per head inside the op.
  const float wscale = static_cast<float>(std::pow(static_cast<double>(c.index_head_dim), -0.5) *
                                          std::pow(static_cast<double>(c.index_n_heads), -0.5));
  Workspace& ws = ctx.ws;
  if (ctx.device_step)  // n_visible from Ops::decode_index; at most the whole store
    ctx.ops.indexer_topk_dev(ws.qi.data(), ws.wi.data(), rows, c.index_n_heads, c.index_head_dim,
                             wscale, keys, ws.n_visible.data(), cache_.cap_blocks, m.tail_width,
                             index_base, idx, m.width, m.window_width);
  else
    ctx.ops.indexer_topk(ws.qi.data(), ws.wi.data(), rows, c.index_n_heads, c.index_head_dim,
                         wscale, keys, m.n_visible.data(), m.tail_width, index_base,
                         idx, m.width, m.window_width);
}

// §4.20-§4.21 and §5 line 5: sink attention over kv_source, inverse rope, grouped wo_a,
// wo_b, then hc_post into ws.h_mid.
void Layer::attention_back(LayerContext& ctx, const float* kv_source, const MergedIndex& m,
                           const int32_t* idx, const float* h, int rows) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  const bool act = ctx.num.act_bf16();
  const float scale = static_cast<float>(std::pow(static_cast<double>(c.head_dim), -0.5));
  if (ctx.device_step) {  // the attention and the inverse rope as one op (issue 12)
    ops.sink_attention_rope_dev(ws.q.data(), rows, c.num_attention_heads, c.head_dim, kv_source,
                                idx, m.width, w_.attn_sink, scale, *rope_, ws.step_pos(),
                                ws.o.data());
  } else {
    if (ctx.gemm)
      ops.sink_attention_gemm(ws.q.data(), rows, c.num_attention_heads, c.head_dim, kv_source,
                              idx, m.width, w_.attn_sink, scale, ws.o.data());
    else
      ops.sink_attention(ws.q.data(), rows, c.num_attention_heads, c.head_dim, kv_source,
                         idx, m.width, w_.attn_sink, scale, ws.o.data());
    rope_rows(ctx, ws.o.data(), rows, c.num_attention_heads, c.head_dim, true);
  }
  if (ctx.gemm) ops.grouped_wo_a_gemm(w_.wo_a, ws.o.data(), rows, c.o_groups, act, ws.og.data());
  else ops.grouped_wo_a(w_.wo_a, ws.o.data(), rows, c.o_groups, act, ws.og.data());
  linear(ctx, w_.wo_b, ws.og.data(), rows, ws.a.data());
  ops.hc_post(ws.a.data(), h, ws.post.data(), ws.comb.data(), rows, c.hc_mult, c.hidden_size,
              ws.h_mid.data());
}

// §5 lines 6-10: FFN sub-block from ws.h_mid into h (§4.22-§4.24). A decode step fuses
// hc_pre with the norm and the MoE's combine with hc_post (issue 12).
void Layer::ffn(LayerContext& ctx, const int32_t* ids, int rows, float* h) {
  Ops& ops = ctx.ops;
  const ModelConfig& c = ctx.cfg;
  Workspace& ws = ctx.ws;
  const float scale = static_cast<float>(c.routed_scaling_factor);
  const float limit = static_cast<float>(c.swiglu_limit);
  if (ctx.device_step) {  // ids: the StepState token
    ops.hc_pre_norm(ws.h_mid.data(), rows, c.hc_mult, c.hidden_size, w_.hc_ffn, c.rms_norm_eps,
                    c.hc_eps, c.hc_sinkhorn_iters, w_.ffn_norm, ws.y.data(), ws.post.data(),
                    ws.comb.data(), ws.x.data());
    ops.route_dev(w_, ws.x.data(), rows, ids, c.hidden_size, c.n_routed_experts,
                  c.num_experts_per_tok, scale, ws.sel.data(), ws.wt.data());
    ops.moe_hc_post(w_, ws.x.data(), rows, ws.sel.data(), ws.wt.data(), c.num_experts_per_tok,
                    limit, ctx.num, ws.moe_out.data(), ws.h_mid.data(), ws.post.data(),
                    ws.comb.data(), c.hc_mult, h);
    return;
  }
  ops.hc_pre(ws.h_mid.data(), rows, c.hc_mult, c.hidden_size, w_.hc_ffn, c.rms_norm_eps,
             c.hc_eps, c.hc_sinkhorn_iters, ws.y.data(), ws.post.data(), ws.comb.data());
  ops.rmsnorm(ws.y.data(), w_.ffn_norm, rows, c.hidden_size, c.rms_norm_eps, ws.x.data());
  if (ctx.gemm)  // a prefill's or a chunk's rows: the gate logits as a GEMM (issue 13)
    ops.route_gemm(w_, ws.x.data(), rows, ids, c.hidden_size, c.n_routed_experts,
                   c.num_experts_per_tok, scale, ws.sel.data(), ws.wt.data());
  else
    ops.route(w_, ws.x.data(), rows, ids, c.hidden_size, c.n_routed_experts,
              c.num_experts_per_tok, scale, ws.sel.data(), ws.wt.data());
  if (ctx.gemm)
    ops.moe_gemm(w_, ws.x.data(), rows, ws.sel.data(), ws.wt.data(), c.num_experts_per_tok,
                 limit, ctx.num, ws.moe_out.data());
  else
    ops.moe(w_, ws.x.data(), rows, ws.sel.data(), ws.wt.data(), c.num_experts_per_tok,
            limit, ctx.num, ws.moe_out.data());
  ops.hc_post(ws.moe_out.data(), ws.h_mid.data(), ws.post.data(), ws.comb.data(), rows,
              c.hc_mult, c.hidden_size, h);
}

// SPECDECODE §2.3: taps[t, k, :] = hc_mean(h[t]) for this layer's column block k.
void Layer::write_taps(LayerContext& ctx, const float* h, int rows, float* taps) {
  if (tap_col_ < 0) return;
  if (taps == nullptr)
    throw Error(cat("layer ", w_.layer_id, " is a drafter tap target but no taps buffer was given"));
  const int hidden = ctx.cfg.hidden_size;
  ctx.ops.hc_mean(h, rows, ctx.cfg.hc_mult, hidden, taps + static_cast<int64_t>(tap_col_) * hidden,
                  ctx.n_targets * hidden);
}

void Layer::write_last_taps(LayerContext& ctx, const float* h, int rows, float* taps) {
  const int tap_rows = std::min(cache_.window, rows);
  write_taps(ctx, h + static_cast<int64_t>(rows - tap_rows) * ctx.cfg.hc_mult * ctx.cfg.hidden_size,
             tap_rows, taps);
}

}  // namespace dsv4
