// The DSpark drafter (SPECDECODE.md §2): main_x and the per-block rings (§2.4-§2.5),
// the draft blocks (§2.6, the trunk layer code with the drafter's attention set), the
// exit head (§2.7), Markov chaining (§2.8) and the confidence head (§2.9).
#include "stage/drafter.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace dsv4 {
namespace {

// SPECDECODE §2.1 load-time refusals not already made by Checkpoint::load_drafter.
void check_drafter(const ModelConfig& c, const DrafterWeights& w) {
  const std::string& src = c.source;
  if (!c.dspark.present) throw Error(cat(src, ": DSpark drafter needs the dspark_* fields"));
  const int B = c.dspark.block_size;
  if (B < 1) throw Error(cat(src, ": dspark_block_size ", B, " < 1"));
  if (B + 1 > c.sliding_window)
    throw Error(cat(src, ": verify depth dspark_block_size + 1 = ", B + 1,
                    " exceeds sliding_window ", c.sliding_window, " (SPECDECODE R-S2)"));
  if (c.dspark.noise_token_id < 0 || c.dspark.noise_token_id >= c.vocab_size)
    throw Error(cat(src, ": dspark_noise_token_id ", c.dspark.noise_token_id,
                    " outside [0, vocab_size ", c.vocab_size, ")"));
  for (const BlockWeights& b : w.blocks) {
    if (b.ratio != 0)
      throw Error(cat(src, ": compress_ratios[", b.layer_id, "] = ", b.ratio,
                      " but a DSpark draft block must be window-only (0)"));
    if (b.hash || !b.gate_bias)
      throw Error(cat(src, ": DSpark draft block ", b.layer_id, " must be score-routed"));
  }
  const int64_t taps = static_cast<int64_t>(c.dspark.target_layer_ids.size()) * c.hidden_size;
  if (w.main_proj.out() != c.hidden_size || w.main_proj.in() != taps)
    throw Error(cat("tensor '", w.main_proj.weight.name, "': shape [", w.main_proj.out(), ", ",
                    w.main_proj.in(), "], expected [", c.hidden_size, ", ", taps, "]"));
  for (const TensorView* m : {&w.markov_w1, &w.markov_w2})
    if (m->shape.size() != 2 || m->dim(0) != c.vocab_size || m->dim(1) != c.dspark.markov_rank)
      throw Error(cat("tensor '", m->name, "': expected [vocab ", c.vocab_size, ", markov rank ",
                      c.dspark.markov_rank, "]"));
  const int64_t conf_in = c.hidden_size + c.dspark.markov_rank;
  if (w.confidence.shape.size() != 2 || w.confidence.dim(0) != 1 || w.confidence.dim(1) != conf_in)
    throw Error(cat("tensor '", w.confidence.name, "': expected [1, ", conf_in, "]"));
}

}  // namespace

DsparkDrafter::DsparkDrafter(Checkpoint& ckpt, Ops& ops, const Numerics& num, int64_t max_seq)
    : ops_(ops),
      cfg_(ckpt.config()),
      num_(num),
      max_seq_(max_seq),
      B_(cfg_.dspark.block_size),
      W_(cfg_.sliding_window),
      R_(cfg_.dspark.markov_rank) {
  if (max_seq < 1 || max_seq > cfg_.max_position_embeddings)
    throw Error(cat("drafter: max_seq ", max_seq, " outside [1, max_position_embeddings ",
                    cfg_.max_position_embeddings, "]"));
  const uint64_t bytes0 = ckpt.bytes_loaded();
  w_ = ckpt.load_drafter();
  check_drafter(cfg_, w_);
  embed_table_ = ckpt.load_embed();   // S10: the head rank's own view
  head_matrix_ = ckpt.load_head_matrix();
  weight_bytes_ = ckpt.bytes_loaded() - bytes0;
  for (const TensorView* t : {&embed_table_, &head_matrix_, &w_.main_norm, &w_.exit.norm,
                              &w_.exit.hc_head_fn, &w_.exit.hc_head_base, &w_.exit.hc_head_scale,
                              &w_.markov_w1, &w_.markov_w2, &w_.confidence, &w_.main_proj.weight,
                              &w_.main_proj.scale})
    ops.prepare(*t);

  rope_ = make_plain_rope(cfg_, max_seq + B_);  // draft rows reach max_seq + B - 1 (§2.5)
  ops.prepare(rope_);
  for (BlockWeights& b : w_.blocks)
    blocks_.push_back(std::make_unique<Layer>(ops, std::move(b), cfg_, rope_, max_seq, B_, B_, -1));
  w_.blocks.clear();  // moved into blocks_

  WorkspaceSizes sz;
  sz.rows = B_;
  sz.index_width = W_ + B_;
  ws_ = std::make_unique<Workspace>(ops, cfg_, sz);
  const size_t H = cfg_.hidden_size, V = cfg_.vocab_size, B = B_, R = R_;
  h_ = ops.alloc(B * cfg_.hc_mult * H);
  xc_ = ops.alloc(B * H);
  y_ = ops.alloc(B * H);
  logits_ = ops.alloc(B * V);
  markov_e_ = ops.alloc(B * R);
  bias_ = ops.alloc(V);
  conf_in_ = ops.alloc(B * (H + R));
  conf_ = ops.alloc(B);
  main_x_ = ops.alloc(H);
}

DsparkDrafter::~DsparkDrafter() = default;

void DsparkDrafter::reset() {
  for (auto& b : blocks_) b->reset(ops_);  // zeroes the persistent and transient rows
  ring_pos_ = 0;
}

// R-D4: main_x(p) = RMSNorm_main_norm(main_proj · tap(p)); R-D5: every block's ring row
// of p from it. One row per call (row-count invariance, R-S7).
void DsparkDrafter::write_position(const float* tap, int64_t p) {
  const int H = cfg_.hidden_size;
  ops_.linear_fp8(w_.main_proj, tap, 1, num_.act_bf16(), main_x_.data());
  ops_.rmsnorm(main_x_.data(), w_.main_norm, 1, H, cfg_.rms_norm_eps, main_x_.data());
  LayerContext ctx = context();
  for (auto& b : blocks_) b->write_context_row(ctx, main_x_.data(), p);
}

void DsparkDrafter::prime(const float* taps, int64_t p0) {
  if (p0 < 1 || p0 > max_seq_)
    throw Error(cat("drafter prime: prompt length ", p0, " outside [1, max_seq ", max_seq_, "]"));
  reset();
  const int64_t n = std::min<int64_t>(W_, p0);
  const int64_t tap_width = static_cast<int64_t>(cfg_.dspark.target_layer_ids.size()) * cfg_.hidden_size;
  for (int64_t i = 0; i < n; ++i) write_position(taps + i * tap_width, p0 - n + i);
  ring_pos_ = p0;
}

void DsparkDrafter::write_rings(const float* taps, int64_t m0, int n) {
  if (ring_pos_ == 0) throw Error("drafter write_rings: the rings were never primed (prefill first)");
  if (m0 != ring_pos_)
    throw Error(cat("drafter write_rings: first position ", m0, " but the rings hold positions "
                    "up to ", ring_pos_ - 1, " (R-S5: every committed position, in order)"));
  if (n < 1 || m0 + n > max_seq_)
    throw Error(cat("drafter write_rings: ", n, " rows at position ", m0, " outside [1, max_seq ",
                    max_seq_, " - ", m0, "]"));
  const int64_t tap_width = static_cast<int64_t>(cfg_.dspark.target_layer_ids.size()) * cfg_.hidden_size;
  for (int i = 0; i < n; ++i) write_position(taps + i * tap_width, m0 + i);
  ring_pos_ += n;
}

Proposal DsparkDrafter::propose(int32_t head, int64_t anchor) {
  if (ring_pos_ == 0) throw Error("drafter propose: the rings were never primed (prefill first)");
  if (anchor != ring_pos_ - 1)
    throw Error(cat("drafter propose: anchor ", anchor, " but the rings hold positions up to ",
                    ring_pos_ - 1, " (SPECDECODE §2.5)"));
  if (head < 0 || head >= cfg_.vocab_size)
    throw Error(cat("drafter propose: head token ", head, " outside [0, vocab_size ",
                    cfg_.vocab_size, ")"));
  const int H = cfg_.hidden_size, hc = cfg_.hc_mult;
  const int64_t V = cfg_.vocab_size;
  const int64_t m0 = anchor + 1;

  // §2.6: rows [t, noise x (B-1)] at positions m0 .. m0+B-1 through every block.
  std::vector<int32_t> ids(B_, static_cast<int32_t>(cfg_.dspark.noise_token_id));
  ids[0] = head;
  ops_.embed(embed_table_, ids.data(), B_, hc, h_.data());  // [B, hc, H]
  const int n_ring = static_cast<int>(std::min<int64_t>(W_, m0));
  LayerContext ctx = context();
  for (auto& b : blocks_) b->draft(ctx, ids.data(), m0, B_, n_ring, h_.data());

  // §2.7 exit head: xc (pre-norm, kept), logits_pre = head · RMSNorm(xc).
  ops_.hc_head(h_.data(), B_, hc, H, w_.exit, cfg_.rms_norm_eps, cfg_.hc_eps, xc_.data());
  ops_.rmsnorm(xc_.data(), w_.exit.norm, B_, H, cfg_.rms_norm_eps, y_.data());
  ops_.linear_island(head_matrix_, y_.data(), B_, logits_.data());  // [B, V]

  // §2.8 sequential Markov chaining: row i's bias is indexed by out[i].
  Proposal p;
  p.out_ids.assign(B_ + 1, 0);
  p.out_ids[0] = head;
  for (int i = 0; i < B_; ++i) {
    float* e = markov_e_.data() + static_cast<int64_t>(i) * R_;
    float* row = logits_.data() + i * V;
    ops_.embed(w_.markov_w1, &p.out_ids[i], 1, 1, e);          // e_i = markov_w1[out[i]]
    ops_.linear_island(w_.markov_w2, e, 1, bias_.data());      // bias_i = markov_w2 · e_i
    ops_.add(row, bias_.data(), V);                            // logits_post[i]
    ops_.argmax(row, 1, V, &p.out_ids[i + 1]);                 // lowest index on ties
    if (p.out_ids[i + 1] < 0) {  // S9: drafts become noise; the round still verifies
      p.nan = true;
      std::fill(p.out_ids.begin() + 1, p.out_ids.end(),
                static_cast<int32_t>(cfg_.dspark.noise_token_id));
      p.confidence.assign(B_, std::numeric_limits<float>::quiet_NaN());
      return p;
    }
  }

  // §2.9 confidence[i] = conf_w · concat(xc[i], e_i).
  for (int i = 0; i < B_; ++i) {
    float* dst = conf_in_.data() + static_cast<int64_t>(i) * (H + R_);
    ops_.copy(dst, xc_.data() + static_cast<int64_t>(i) * H, H);
    ops_.copy(dst + H, markov_e_.data() + static_cast<int64_t>(i) * R_, R_);
  }
  ops_.linear_island(w_.confidence, conf_in_.data(), B_, conf_.data());  // [B, 1]
  p.confidence.resize(B_);
  ops_.download(p.confidence.data(), conf_.data(), B_);
  return p;
}

std::vector<CacheClass> DsparkDrafter::ring_classes() const {
  std::vector<CacheClass> out;
  const size_t n = static_cast<size_t>(W_) * cfg_.head_dim;
  for (size_t k = 0; k < blocks_.size(); ++k) {
    std::vector<float> rows(n);
    ops_.download(rows.data(), blocks_[k]->cache().kvc.data(), n);
    CacheClass c;
    c.name = cat("drafter block ", k, " ring");
    c.bytes.resize(n * sizeof(float));
    std::memcpy(c.bytes.data(), rows.data(), c.bytes.size());
    out.push_back(std::move(c));
  }
  return out;
}

uint64_t DsparkDrafter::resident_bytes() const {
  uint64_t n = weight_bytes_ + ws_->bytes();
  for (const auto& b : blocks_) n += b->cache().kvc.size() * sizeof(float);
  for (const FBuf* b : {&h_, &xc_, &y_, &logits_, &markov_e_, &bias_, &conf_in_, &conf_, &main_x_})
    n += b->size() * sizeof(float);
  return n;
}

}  // namespace dsv4
