// Stage: loads the weights of its layer range only, prepares them, allocates every
// cache and workspace once, and runs prefill / decode / verify / commit / head
// (ARCHITECTURE.md "Operations every stage implements"; SPECDECODE.md §3-§4).
#include "stage/stage.h"

#include <algorithm>

#include "base/error.h"
#include "stage/head.h"
#include "stage/stage_impl.h"

namespace dsv4 {
namespace {

// Column block of layer l in the tap rows (S14), -1 if it is not a target.
int tap_column(const ModelConfig& c, int l) {
  const auto& t = c.dspark.target_layer_ids;
  const auto it = std::find(t.begin(), t.end(), l);
  return it == t.end() ? -1 : static_cast<int>(it - t.begin());
}

void check_spec(const ModelConfig& c, const StageSpec& s) {
  if (s.n_ranks < 1 || s.rank < 0 || s.rank >= s.n_ranks)
    throw Error(cat("stage: rank ", s.rank, " outside [0, ", s.n_ranks, ")"));
  if (s.layers.begin < 0 || s.layers.begin >= s.layers.end ||
      s.layers.end > c.num_hidden_layers)
    throw Error(cat("stage: layer range [", s.layers.begin, ", ", s.layers.end,
                    ") is not a non-empty part of [0, ", c.num_hidden_layers, ")"));
  if (s.max_seq < 1 || s.max_seq > c.max_position_embeddings)
    throw Error(cat("stage: max_seq ", s.max_seq, " outside [1, max_position_embeddings ",
                    c.max_position_embeddings, "]"));
  if (s.max_prompt < 0 || s.max_prompt > s.max_seq)
    throw Error(cat("stage: max_prompt ", s.max_prompt, " outside [0, max_seq ", s.max_seq, "]"));
  if (s.prefill_chunk < 0)
    throw Error(cat("stage: prefill_chunk ", s.prefill_chunk, " is negative (0: unchunked)"));
  if (s.drafter && !c.dspark.present)
    throw Error(cat("stage: drafter requested but ", c.source, " has no dspark_* fields"));
  if (s.drafter && c.dspark.block_size + 1 > c.sliding_window)
    throw Error(cat("stage: verify depth ", c.dspark.block_size + 1, " exceeds sliding_window ",
                    c.sliding_window, " (SPECDECODE R-S2)"));
}

}  // namespace

Stage::Impl::Impl(Checkpoint& ckpt, Ops& ops_, const StageSpec& spec_)
    : ops(ops_), cfg(ckpt.config()), spec(spec_) {
  check_spec(cfg, spec);
  if (spec.max_prompt == 0) spec.max_prompt = spec.max_seq;
  chunk_rows = spec.prefill_chunk == 0 ? spec.max_prompt
                                       : std::min(spec.prefill_chunk, spec.max_prompt);
  // A chunk after the first keeps its latents in every layer's transient rows.
  const int extend_rows = chunk_rows < spec.max_prompt ? static_cast<int>(chunk_rows) : 0;
  tmax = spec.drafter ? cfg.dspark.block_size + 1 : 0;
  n_targets = spec.drafter ? static_cast<int>(cfg.dspark.target_layer_ids.size()) : 0;
  const uint64_t bytes0 = ckpt.bytes_loaded();

  plain = make_plain_rope(cfg, spec.max_seq + (spec.drafter ? cfg.dspark.block_size : 0));
  yarn = make_yarn_rope(cfg, spec.max_seq);
  ops.prepare(plain);
  ops.prepare(yarn);
  if (spec.first()) {
    embed_table = ckpt.load_embed();
    ops.prepare(embed_table);
  }
  if (spec.last()) {
    head = ckpt.load_head();
    head_matrix = ckpt.load_head_matrix();
    for (const TensorView* t :
         {&head.norm, &head.hc_head_fn, &head.hc_head_base, &head.hc_head_scale, &head_matrix})
      ops.prepare(*t);
  }

  WorkspaceSizes sz;
  sz.rows = static_cast<int>(std::max<int64_t>({chunk_rows, tmax, 1}));
  sz.step_rows = std::max(tmax, 1);
  int tail_cap = 0;
  for (int l = spec.layers.begin; l < spec.layers.end; ++l) {
    BlockWeights w = ckpt.load_block(l);
    const int r = w.ratio;
    if (r > 0) {
      sz.max_blocks = std::max(sz.max_blocks, sz.rows / r);
      sz.cmp_latent = std::max(sz.cmp_latent, w.compressor->latent());
      const int nb_cap = static_cast<int>(spec.max_seq / r);
      tail_cap = std::max(
          tail_cap, decode_index_shape(r, cfg.sliding_window, cfg.index_topk, nb_cap).tail_width);
    }
    if (w.indexer) sz.idx_latent = std::max(sz.idx_latent, w.indexer->compressor.latent());
    const int tap = spec.drafter ? tap_column(cfg, l) : -1;
    layers.push_back(std::make_unique<Layer>(ops, std::move(w), cfg, r == 0 ? plain : yarn,
                                             spec.max_seq, tmax, std::max(tmax, 1), tap,
                                             extend_rows));
    if (spec.on_layer_loaded)
      spec.on_layer_loaded(l - spec.layers.begin + 1, spec.layers.end - spec.layers.begin);
  }
  sz.index_width = cfg.sliding_window + tail_cap;
  ws = std::make_unique<Workspace>(ops, cfg, sz);
  weight_bytes = ckpt.bytes_loaded() - bytes0;
}

void Stage::Impl::check_tokens(const std::vector<int32_t>& ids, const char* what) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg.vocab_size)
      throw Error(cat(what, ": token id ", ids[i], " at index ", i, " outside [0, vocab_size ",
                      cfg.vocab_size, ")"));
}

void Stage::Impl::check_no_round(const char* what) const {
  if (round_open)
    throw Error(cat(what, ": a verify round is open at position ", pos,
                    " (commit it first, SPECDECODE R-S9)"));
}

// Issue 12: the step's one input is the StepState upload (position, token), made before
// the step on the same stream; every op of the step reads them from backend memory, so
// its calls are the same at every position and run as one captured graph (Ops::run_step,
// key: this stage, one row, its boundary buffers). The host side follows the step.
void Stage::Impl::run_decode(int32_t token, float* h, float* taps, float* logits) {
  ws->upload_step(ops, pos, &token, 1);
  const StepKey key{this, 1, {h, taps, logits}};
  ops.run_step(key, [&] {
    if (spec.first()) ops.embed_dev(embed_table, ws->step_token(), 1, cfg.hc_mult, h);
    LayerContext ctx = context();
    ctx.device_step = true;
    for (auto& layer : layers) layer->decode(ctx, h, taps);
    if (logits) trunk_head_logits(ops, cfg, head, head_matrix, h, 1, ws->y.data(), logits);
  });
  for (auto& layer : layers) layer->count_decoded(pos);
}

// A verify round as the plain step (issue 12 target 3): the StepState of its T rows
// (positions pos.., the T ids), then one run_step, a captured graph per row count replayed
// at every position. Its key names the round by the layers (&layers), the plain step by
// the stage (this): a round of one row is another step than a plain decode.
void Stage::Impl::run_verify(const std::vector<int32_t>& ids, float* h, float* taps) {
  const int t = static_cast<int>(ids.size());
  ws->upload_step(ops, pos, ids.data(), t);
  const StepKey key{&layers, t, {h, taps, nullptr}};
  ops.run_step(key, [&] {
    if (spec.first()) ops.embed_dev(embed_table, ws->step_token(), t, cfg.hc_mult, h);
    LayerContext ctx = context();
    ctx.device_step = true;
    for (auto& layer : layers) layer->verify(ctx, t, h, taps);
  });
  for (auto& layer : layers) layer->count_verified(pos, t);
}

Stage::Stage(Checkpoint& ckpt, Ops& ops, const StageSpec& spec)
    : impl_(std::make_unique<Impl>(ckpt, ops, spec)), spec_(impl_->spec) {}

Stage::~Stage() = default;

uint64_t Stage::resident_bytes() const {
  uint64_t n = impl_->weight_bytes + impl_->ws->bytes();
  for (const auto& l : impl_->layers)
    n += (l->cache().kvc.size() + l->cache().ikvc.size()) * sizeof(float);
  return n;
}

int64_t Stage::pos() const { return impl_->pos; }

void Stage::embed(const std::vector<int32_t>& ids, float* h) {
  Impl& m = *impl_;
  if (!spec_.first()) throw Error(cat("embed: rank ", spec_.rank, " is not the first stage"));
  if (ids.empty() || static_cast<int64_t>(ids.size()) > m.ws->sizes.rows)
    throw Error(cat("embed: ", ids.size(), " rows outside [1, ", m.ws->sizes.rows, "]"));
  m.check_tokens(ids, "embed");
  m.ops.embed(m.embed_table, ids.data(), static_cast<int>(ids.size()), m.cfg.hc_mult, h);
}

void Stage::prefill(const std::vector<int32_t>& ids, float* h, float* taps) {
  Impl& m = *impl_;
  m.check_no_round("prefill");
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0) throw Error("prefill: empty prompt");
  if (n > spec_.max_seq)
    throw Error(cat("prefill: prompt of ", n, " tokens exceeds max_seq ", spec_.max_seq));
  if (n > spec_.max_prompt)
    throw Error(cat("prefill: prompt of ", n, " tokens exceeds max_prompt ", spec_.max_prompt));
  if (n > m.chunk_rows)
    throw Error(cat("prefill: ", n, " rows exceed prefill_chunk ", m.chunk_rows,
                    " (the rest of the prompt goes in extend chunks)"));
  m.check_tokens(ids, "prefill");
  reset();
  if (spec_.first()) m.ops.embed(m.embed_table, ids.data(), static_cast<int>(n), m.cfg.hc_mult, h);
  LayerContext ctx = m.context();
  ctx.gemm = true;  // issue 13: a prefill's linears are GEMMs (kernels/ops.h *_gemm)
  for (auto& layer : m.layers) layer->prefill(ctx, ids.data(), static_cast<int>(n), h, taps);
  m.pos = n;
}

void Stage::extend(const std::vector<int32_t>& ids, float* h, float* taps) {
  Impl& m = *impl_;
  m.check_no_round("extend");
  if (m.pos == 0) throw Error("extend: no prefill has run (position 0; a prompt starts with prefill)");
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 1 || n > m.chunk_rows)
    throw Error(cat("extend: chunk of ", n, " rows outside [1, prefill_chunk ", m.chunk_rows, "]"));
  if (m.pos + n > spec_.max_prompt)
    throw Error(cat("extend: prompt of ", m.pos + n, " tokens exceeds max_prompt ",
                    spec_.max_prompt));
  m.check_tokens(ids, "extend");
  if (spec_.first()) m.ops.embed(m.embed_table, ids.data(), static_cast<int>(n), m.cfg.hc_mult, h);
  LayerContext ctx = m.context();
  ctx.gemm = true;  // as prefill's
  for (auto& layer : m.layers) layer->extend(ctx, ids.data(), m.pos, static_cast<int>(n), h, taps);
  m.pos += n;
}

int64_t Stage::chunk_rows() const { return impl_->chunk_rows; }

void Stage::decode(int32_t token, float* h, float* taps, float* logits) {
  Impl& m = *impl_;
  if (logits && !spec_.last())
    throw Error(cat("decode: logits asked of rank ", spec_.rank, ", which is not the last stage"));
  m.check_no_round("decode");
  if (m.pos == 0) throw Error("decode: no prefill has run (position 0)");
  if (m.pos >= spec_.max_seq)
    throw Error(cat("decode: position ", m.pos, " is past max_seq ", spec_.max_seq));
  m.check_tokens({token}, "decode");
  m.run_decode(token, h, taps, logits);
  ++m.pos;
}

void Stage::verify(const std::vector<int32_t>& ids, float* h, float* taps) {
  Impl& m = *impl_;
  if (!spec_.drafter) throw Error("verify: the stage was built without the drafter (tmax 0)");
  m.check_no_round("verify");
  if (m.pos == 0) throw Error("verify: no prefill has run (position 0)");
  const int64_t t = static_cast<int64_t>(ids.size());
  if (t < 1 || t > m.tmax) throw Error(cat("verify: T = ", t, " outside [1, tmax ", m.tmax, "]"));
  if (m.pos + t > spec_.max_seq)
    throw Error(cat("verify: positions ", m.pos, " + T ", t, " exceed max_seq ", spec_.max_seq));
  m.check_tokens(ids, "verify");
  m.run_verify(ids, h, taps);
  m.round_open = true;
  m.round_rows = static_cast<int>(t);
}

void Stage::commit(int n) {
  Impl& m = *impl_;
  if (!m.round_open) throw Error(cat("commit: no verify round is open (n = ", n, ")"));
  if (n < 1 || n > m.round_rows)
    throw Error(cat("commit: n = ", n, " outside [1, T = ", m.round_rows, "]"));
  for (auto& layer : m.layers) layer->commit(m.ops, m.pos, n, m.round_rows);
  m.pos += n;
  m.round_open = false;
}

void Stage::reset() {
  Impl& m = *impl_;
  for (auto& layer : m.layers) layer->reset(m.ops);
  m.pos = 0;
  m.round_open = false;
  m.round_rows = 0;
}

void Stage::head_logits(const float* h, int rows, float* logits) {
  Impl& m = *impl_;
  if (!spec_.last()) throw Error(cat("head_logits: rank ", spec_.rank, " is not the last stage"));
  if (rows < 1 || rows > m.ws->sizes.rows)
    throw Error(cat("head_logits: ", rows, " rows outside [1, ", m.ws->sizes.rows, "]"));
  trunk_head_logits(m.ops, m.cfg, m.head, m.head_matrix, h, rows, m.ws->y.data(), logits);
}

}  // namespace dsv4
