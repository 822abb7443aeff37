#include "stage/coordinator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "base/error.h"

namespace dsv4 {

void check_admission(const GenerationRequest& req, int64_t max_seq, int64_t vocab) {
  const auto p0 = static_cast<int64_t>(req.prompt.size());
  if (p0 < 1) throw Error("prompt_ids: the prompt is empty (a request needs >= 1 token)");
  if (req.max_new < 1) throw Error(cat("max_new: ", req.max_new, " (must be >= 1)"));
  if (p0 > max_seq)
    throw Error(cat("prompt_ids: prompt of ", p0, " tokens exceeds max_seq ", max_seq));
  if (p0 + req.max_new - 1 > max_seq)
    throw Error(cat("max_new: prompt of ", p0, " tokens + max_new ", req.max_new,
                    " - 1 exceeds max_seq ", max_seq, " (SPECDECODE.md S5)"));
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= vocab)
      throw Error(cat("prompt_ids[", i, "]: token id ", req.prompt[i], " outside [0, ", vocab,
                      ")"));
  for (size_t i = 0; i < req.stop_ids.size(); ++i)
    if (req.stop_ids[i] < 0 || req.stop_ids[i] >= vocab)
      throw Error(cat("stop_ids[", i, "]: token id ", req.stop_ids[i], " outside [0, ", vocab,
                      ") (stop_ids: / --stop-ids)"));
  check_sampling(req.sampling, "");
}

namespace {

// SPECDECODE §5.1 / ARCHITECTURE.md "A spec round as messages": every engine call is one
// operation header to every rank. Keeps the logits rows of emitted tokens when asked.
// Sampled runs: each verify row's token is drawn from its logits with plain sampling's
// uniform at that position, the point-mass form of lossless speculative sampling for the
// deterministic drafters (stage/spec_sampling.h, SPECDECODE Q8), so accept_walk over
// these tokens emits what plain sampling emits with the same seed.
class PipelineSpecEngine final : public SpecEngine {
 public:
  PipelineSpecEngine(std::function<OpResult(const OpHeader&)> run, OpHeader base,
                     GenerationResult& out, int64_t vocab, const SamplingParams& sampling,
                     bool keep_logits)
      : run_(std::move(run)), header_(std::move(base)), out_(out), vocab_(vocab),
        sampling_(sampling), keep_logits_(keep_logits) {}

  Proposal propose(int32_t head, int64_t anchor) override {
    m0_ = anchor + 1;
    OpResult r = send(OpKind::propose, {head}, 0, false);
    Proposal p;
    p.out_ids = std::move(r.ids);
    p.confidence = std::move(r.scores);
    DSV4_CHECK(!p.out_ids.empty() && p.out_ids[0] == head, "proposal of ", p.out_ids.size(),
               " ids without the head token");
    p.nan = std::any_of(p.confidence.begin(), p.confidence.end(),
                        [](float v) { return std::isnan(v); });
    return p;
  }
  std::vector<int32_t> verify(const std::vector<int32_t>& x) override {
    OpResult r = send(OpKind::verify, x, 0, header_.want_logits);
    DSV4_CHECK(r.ids.size() == x.size(), "verify of ", x.size(), " rows returned ", r.ids.size());
    logits_ = std::move(r.logits);
    if (!sampling_.greedy())
      for (size_t i = 0; i < x.size(); ++i)  // row i (position m0 + i) chooses token m0 + i + 1
        r.ids[i] = sample_token(logits_.data() + i * vocab_, vocab_, sampling_,
                                m0_ + static_cast<int64_t>(i) + 1);
    return r.ids;
  }
  void commit(int n) override {
    send(OpKind::commit, {}, n, false);
    if (!keep_logits_) return;
    for (int i = 0; i < n; ++i)  // row i chose the token after position m0 + i
      out_.logits.emplace_back(logits_.begin() + i * vocab_, logits_.begin() + (i + 1) * vocab_);
  }

 private:
  OpResult send(OpKind kind, std::vector<int32_t> ids, int count, bool logits) {
    OpHeader h = header_;
    h.kind = kind;
    h.pos = m0_;
    h.ids = std::move(ids);
    h.count = count;
    h.want_logits = logits;
    return run_(h);
  }

  std::function<OpResult(const OpHeader&)> run_;
  OpHeader header_;
  GenerationResult& out_;
  int64_t vocab_;
  const SamplingParams& sampling_;
  bool keep_logits_;
  int64_t m0_ = 0;
  std::vector<float> logits_;
};

}  // namespace

OpResult Coordinator::run(const OpHeader& header) {
  if (control_) control_->send_header(header);
  return pipeline_.execute(header);
}

GenerationResult Coordinator::generate(const GenerationRequest& req) {
  check_admission(req, max_seq_, vocab_);
  using Clock = std::chrono::steady_clock;
  using Ms = std::chrono::duration<double, std::milli>;
  GenerationResult out;
  const auto p0 = static_cast<int64_t>(req.prompt.size());
  const bool sampled = !req.sampling.greedy();
  // The committed token of one row: the head's argmax (greedy), or drawn on rank 0 from
  // the row's logits keyed by its position (stage/sampler.h).
  auto take = [&](OpResult&& r) {
    DSV4_CHECK(r.ids.size() == 1, "head returned ", r.ids.size(), " ids for one row");
    const auto position = p0 + static_cast<int64_t>(out.tokens.size());
    out.tokens.push_back(sampled ? sample_token(r.logits.data(), vocab_, req.sampling, position)
                                 : r.ids[0]);
    const bool streamed = req.on_token && req.spec_tmax == 0;  // spec: after its rounds
    if (streamed && !req.on_token(out.tokens.back())) out.ended_by_caller = true;
    if (req.keep_logits) {
      DSV4_CHECK(r.logits.size() == static_cast<size_t>(vocab_), "logits row of ",
                 r.logits.size(), " floats");
      out.logits.push_back(std::move(r.logits));
    }
  };

  OpHeader header;
  header.seq = seq_;
  header.want_logits = req.keep_logits || sampled;
  header.kind = OpKind::prefill;
  const int64_t chunk = prefill_chunk_ > 0 ? prefill_chunk_ : p0;
  const auto prefill_start = Clock::now();
  // Chunks [c0, c0 + chunk): only the last is answered, so rank 0 sends the next chunk
  // while the later stages still work on this one (issue 13).
  for (int64_t c0 = 0; c0 < p0; c0 += chunk) {
    const int64_t c1 = std::min(p0, c0 + chunk);
    header.pos = c0;
    header.ids.assign(req.prompt.begin() + c0, req.prompt.begin() + c1);
    header.last_chunk = c1 == p0;
    OpResult r = run(header);
    if (header.last_chunk) take(std::move(r));
  }
  header.last_chunk = true;
  out.prefill_ms = Ms(Clock::now() - prefill_start).count();

  // Greedy decode: the last emitted token is consumed at the next position.
  const auto decode_start = Clock::now();
  if (req.spec_tmax > 0) {
    PipelineSpecEngine engine([this](const OpHeader& h) { return run(h); }, header, out, vocab_,
                              req.sampling, req.keep_logits);
    SpecOptions opt;
    opt.p0 = static_cast<int64_t>(req.prompt.size());
    opt.n_new = req.max_new;
    opt.depth_cap = req.depth_cap;
    opt.auto_depth = req.auto_depth;
    opt.tmax = req.spec_tmax;
    opt.stop_ids = req.stop_ids;
    opt.on_round = req.on_round;
    const int32_t head = out.tokens.back();
    out.tokens.pop_back();  // spec_generate emits the head token itself
    SpecResult spec = spec_generate(engine, head, opt);
    out.tokens = std::move(spec.tokens);
    out.rounds = std::move(spec.rounds);
    out.ended_by_carry = spec.ended_by_carry;
    out.stopped = spec.stopped;
    out.decode_steps = static_cast<int64_t>(out.rounds.size());
    for (size_t i = 0; req.on_token && i < out.tokens.size(); ++i)
      if (!req.on_token(out.tokens[i])) {
        out.tokens.resize(i + 1);
        if (out.logits.size() > i + 1) out.logits.resize(i + 1);
        out.ended_by_caller = true;
      }
  }
  // Plain greedy; a stop id is emitted and ends the run unconsumed (S6).
  header.kind = OpKind::decode;
  out.stopped = out.stopped || is_stop(req.stop_ids, out.tokens.back());
  while (!out.stopped && !out.ended_by_caller &&
         static_cast<int64_t>(out.tokens.size()) < req.max_new) {
    header.pos = static_cast<int64_t>(req.prompt.size() + out.tokens.size()) - 1;
    header.ids = {out.tokens.back()};
    take(run(header));
    ++out.decode_steps;
    out.stopped = is_stop(req.stop_ids, out.tokens.back());
  }
  out.decode_ms = Ms(Clock::now() - decode_start).count();

  header.kind = OpKind::reset;  // the sequence is done: every stage frees its caches
  header.ids.clear();
  header.pos = 0;
  run(header);
  ++seq_;
  return out;
}

void Coordinator::stop() {
  OpHeader header;
  header.kind = OpKind::stop;
  if (control_) control_->send_header(header);
}

}  // namespace dsv4
