#include "stage/pipeline.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace dsv4 {

namespace {
bool moves_rows(OpKind k) {
  return k == OpKind::prefill || k == OpKind::decode || k == OpKind::verify;
}

// R-D5 prime over the chunks of a prompt: the drafter rings hold the last min(W, p)
// positions after a prompt of p tokens. A chunk's taps are its last min(W, n) rows: the
// first chunk, or one of >= W rows, primes afresh from them; a shorter later chunk
// appends its n positions in order (older ones leave the W-slot rings either way).
void prime_chunk(Drafter& drafter, const float* taps, int64_t pos0, int64_t rows, int window) {
  if (pos0 == 0 || rows >= window) drafter.prime(taps, pos0 + rows);
  else drafter.write_rings(taps, pos0, static_cast<int>(rows));
}

// Operations the head answers to rank 0: those with rows (a prefill's last chunk only)
// and proposals.
bool answers(const OpHeader& h) {
  if (h.kind == OpKind::prefill) return h.last_chunk;
  return moves_rows(h.kind) || h.kind == OpKind::propose;
}
}  // namespace

int64_t boundary_tap_rows(const OpHeader& header, const ModelConfig& config) {
  if (!moves_rows(header.kind)) return 0;
  return header.kind == OpKind::prefill ? std::min<int64_t>(config.sliding_window, header.rows())
                                        : header.rows();
}

HeadOutput compute_operation(Stage& stage, Ops& ops, const ModelConfig& config,
                             const OpHeader& header, float* h, float* taps, bool keep_logits,
                             Drafter* drafter, float* step_logits, float* round_logits) {
  const StageSpec& spec = stage.spec();
  const int64_t t_rows = header.rows();  // T
  FBuf own_logits;  // the head's logits [rows, V] when the caller keeps none
  if (moves_rows(header.kind)) {
    DSV4_CHECK(t_rows >= 1, "operation ", op_kind_name(header.kind), " without rows");
    DSV4_CHECK(stage.pos() == header.pos, "rank ", spec.rank, ": stage at position ",
               stage.pos(), ", operation at ", header.pos);
  }
  switch (header.kind) {  // the first stage embeds the ids itself (stage.h)
    case OpKind::prefill:  // a whole prompt, or one chunk of it at header.pos (issue 13)
      if (header.pos == 0) stage.prefill(header.ids, h, taps);
      else stage.extend(header.ids, h, taps);
      if (drafter) prime_chunk(*drafter, taps, header.pos, t_rows, config.sliding_window);
      if (!header.last_chunk) return {};  // the head scores the prompt's last row only
      break;
    case OpKind::decode:
      DSV4_CHECK(t_rows == 1, "decode of ", t_rows, " rows");
      // The head scores the row inside the step (Stage::decode), into the caller's
      // step_logits (the pipeline keeps one for every step) or a buffer of its own.
      if (spec.last() && !step_logits) {
        own_logits = ops.alloc(static_cast<size_t>(config.vocab_size));
        step_logits = own_logits.data();
      }
      stage.decode(header.ids[0], h, taps, spec.last() ? step_logits : nullptr);
      break;
    case OpKind::verify: stage.verify(header.ids, h, taps); break;
    case OpKind::commit:
      stage.commit(header.count);
      if (drafter) drafter->write_rings(taps, header.pos, header.count);  // R-S5
      return {};
    case OpKind::reset:
      stage.reset();
      if (drafter) drafter->reset();
      return {};
    case OpKind::propose: {
      if (!spec.last()) return {};
      if (!drafter || t_rows != 1)
        throw Error(cat("rank ", spec.rank, ": propose at position ", header.pos,
                        drafter ? " needs exactly one head token" : " but no drafter is loaded"));
      Proposal p = drafter->propose(header.ids[0], header.pos - 1);
      HeadOutput out;
      out.argmax = std::move(p.out_ids);
      out.scores = std::move(p.confidence);
      return out;
    }
    case OpKind::stop: return {};
  }
  if (!spec.last()) return {};

  // Rows the head scores: the last prompt row of a prefill, every other operation's rows.
  const int64_t rows = header.kind == OpKind::prefill ? 1 : t_rows;
  const int64_t first_row = t_rows - rows;
  const int64_t vocab = config.vocab_size;  // V
  const size_t row_floats = static_cast<size_t>(config.hc_mult) * config.hidden_size;
  float* logits = step_logits;  // a decode's, scored within the step
  if (header.kind != OpKind::decode) {
    const bool round = header.kind == OpKind::verify && round_logits;
    if (!round) own_logits = ops.alloc(static_cast<size_t>(rows * vocab));
    logits = round ? round_logits : own_logits.data();
    stage.head_logits(h + static_cast<size_t>(first_row) * row_floats, static_cast<int>(rows),
                      logits);
  }
  HeadOutput out;
  out.argmax.resize(static_cast<size_t>(rows));
  ops.argmax(logits, static_cast<int>(rows), vocab, out.argmax.data());
  for (int64_t r = 0; r < rows; ++r)
    if (out.argmax[static_cast<size_t>(r)] < 0)
      throw Error(cat("rank ", spec.rank, ": NaN in the logits of position ",
                      header.pos + first_row + r, " (", op_kind_name(header.kind),
                      "; SPECDECODE.md S9)"));
  if (keep_logits) {
    out.logits.resize(static_cast<size_t>(rows * vocab));
    ops.download(out.logits.data(), logits, out.logits.size());
  }
  return out;
}

Pipeline::Pipeline(Stage& stage, Ops& ops, const ModelConfig& config, ControlPlane* control,
                   DataPlane* data, PipelineHooks hooks, Drafter* drafter)
    : stage_(stage), ops_(ops), config_(config), control_(control), data_(data),
      hooks_(std::move(hooks)), drafter_(drafter) {
  const bool single = stage.spec().n_ranks == 1;
  DSV4_CHECK(single || (control_ && data_), "a multi-rank pipeline needs both planes");
  step_h_ = ops_.alloc(hidden_floats(1));
  if (stage.spec().drafter) step_taps_ = ops_.alloc(tap_floats(1));
  if (stage.spec().last()) step_logits_ = ops_.alloc(static_cast<size_t>(config_.vocab_size));
  if (stage.spec().drafter) {
    round_rows_ = config_.dspark.block_size + 1;
    round_h_ = ops_.alloc(hidden_floats(round_rows_));
    round_taps_ = ops_.alloc(tap_floats(round_rows_));
    if (stage.spec().last())
      round_logits_ = ops_.alloc(static_cast<size_t>(round_rows_ * config_.vocab_size));
  }
}

size_t Pipeline::hidden_floats(int64_t rows) const {
  return static_cast<size_t>(rows) * config_.hc_mult * config_.hidden_size;  // [T, hc, H]
}

size_t Pipeline::tap_floats(int64_t rows) const {
  return static_cast<size_t>(rows) * config_.dspark.target_layer_ids.size() *
         config_.hidden_size;  // [T, n_targets, H]
}

std::vector<float> Pipeline::to_host(const float* p, size_t n) {
  std::vector<float> host(n);
  if (n) ops_.download(host.data(), p, n);
  return host;
}

void Pipeline::record(const OpHeader& header, bool outgoing, const BoundaryPayload& payload,
                      const HeadOutput* head) {
  if (!hooks_.boundary) return;
  BoundaryRecord rec;
  rec.op_index = op_index_ - 1;
  rec.outgoing = outgoing;
  rec.header = &header;
  if (payload.h) rec.h = to_host(payload.h, payload.h_floats);
  if (payload.taps) rec.taps = to_host(payload.taps, payload.tap_floats);
  if (head) {
    rec.logits = head->logits;
    rec.argmax = head->argmax;
    rec.scores = head->scores;
  }
  hooks_.boundary(rec);
}

OpResult Pipeline::execute(const OpHeader& header) {
  const int index = op_index_++;
  if (hooks_.before_op) hooks_.before_op(index, header);
  const auto start = std::chrono::steady_clock::now();
  const StageSpec& spec = stage_.spec();
  const bool rows = moves_rows(header.kind);
  const bool answered = answers(header);  // the head returns a result

  FBuf h, taps;  // per operation, but a plain decode's (step_h_, step_taps_) and a round's
  BoundaryPayload payload;
  if (rows) {
    const bool step = header.kind == OpKind::decode;
    const bool round = header.kind == OpKind::verify && round_rows_ > 0;
    if (round && header.rows() > round_rows_)
      throw Error(cat("rank ", spec.rank, ": verify of ", header.rows(), " rows exceeds tmax ",
                      round_rows_, " (block_size + 1)"));
    if (!step && !round) h = ops_.alloc(hidden_floats(header.rows()));
    payload.h = step ? step_h_.data() : round ? round_h_.data() : h.data();
    payload.h_floats = step ? step_h_.size() : hidden_floats(header.rows());
    if (spec.drafter) {
      const int64_t tap_rows = boundary_tap_rows(header, config_);
      if (!step && !round) taps = ops_.alloc(tap_floats(tap_rows));
      payload.taps = step ? step_taps_.data() : round ? round_taps_.data() : taps.data();
      payload.tap_floats = step ? step_taps_.size() : tap_floats(tap_rows);
    }
    if (!spec.first()) data_->recv(spec.rank - 1, payload);
  }
  record(header, false, spec.first() ? BoundaryPayload{} : payload, nullptr);

  const bool keep_logits = header.want_logits || static_cast<bool>(hooks_.boundary);
  float* op_taps = header.kind == OpKind::commit ? round_taps_.data() : payload.taps;
  HeadOutput head = compute_operation(stage_, ops_, config_, header, payload.h, op_taps,
                                      keep_logits, spec.last() ? drafter_ : nullptr,
                                      step_logits_.data(), round_logits_.data());
  if (rows && spec.last() && hooks_.head_rows) hooks_.head_rows(header, payload);

  OpResult result;
  if (rows && !spec.last()) {
    data_->send(spec.rank + 1, payload);
    record(header, true, payload, nullptr);
  } else if (answered && spec.last()) {
    record(header, true, BoundaryPayload{}, &head);
    result.ids = std::move(head.argmax);
    result.scores = std::move(head.scores);
    if (header.want_logits) result.logits = std::move(head.logits);
    if (!spec.first()) control_->send_result(result);
  } else if (rows) {  // the head's part of an earlier prefill chunk: its rows, unscored
    record(header, true, payload, nullptr);
  }
  if (answered && spec.first() && !spec.last()) result = control_->recv_result();

  const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  if (hooks_.after_op) hooks_.after_op(index, header, ms.count());
  return result;
}

void Pipeline::serve() {
  for (;;) {
    const OpHeader header = control_->recv_header();
    if (header.kind == OpKind::stop) return;
    execute(header);
  }
}

}  // namespace dsv4
