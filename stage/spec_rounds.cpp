#include "stage/spec_rounds.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "base/error.h"

namespace dsv4 {

int accept_walk(const std::vector<int32_t>& x, const std::vector<int32_t>& a, int kv,
                int32_t* next) {
  const int T = static_cast<int>(x.size());
  DSV4_CHECK(static_cast<int>(a.size()) == T && kv == T - 1, "accept walk: T ", T, ", argmax rows ",
             a.size(), ", kv ", kv);
  int c = 0;
  for (int i = 0; i < T; ++i) {
    if (i < kv && a[i] == x[i + 1]) {
      ++c;
      continue;
    }
    *next = a[i];  // correction at the first mismatch, or the bonus a[kv]
    break;
  }
  return c;
}

bool is_stop(const std::vector<int32_t>& stop_ids, int32_t token) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

SpecResult spec_generate(SpecEngine& engine, int32_t head, const SpecOptions& opt) {
  using Clock = std::chrono::steady_clock;
  DSV4_CHECK(opt.p0 >= 1 && opt.n_new >= 1 && opt.tmax >= 1, "spec_generate: p0 ", opt.p0,
             ", n_new ", opt.n_new, ", tmax ", opt.tmax);
  const int64_t depth = opt.depth_cap <= 0 ? std::numeric_limits<int>::max()
                                           : std::max(1, opt.depth_cap);
  SpecResult r;
  std::vector<int32_t>& tokens = r.tokens;
  int32_t t = head;
  bool carry = false;
  while (static_cast<int64_t>(tokens.size()) < opt.n_new) {
    if (carry) {  // the budget truncated a fully accepted round: its bonus fills the last slot
      tokens.push_back(t);
      r.ended_by_carry = true;
      r.stopped = is_stop(opt.stop_ids, t);
      break;
    }
    if (is_stop(opt.stop_ids, t)) {  // S6: the head (a round's `next`) is emitted, no proposal
      tokens.push_back(t);
      r.stopped = r.stopped_at_head = true;
      break;
    }
    const auto start = Clock::now();
    const int64_t m0 = opt.p0 + static_cast<int64_t>(tokens.size());
    const Proposal prop = engine.propose(t, m0 - 1);
    const int k = static_cast<int>(prop.out_ids.size()) - 1;
    SpecRound rec;
    rec.start_pos = m0 - 1;
    rec.drafts.assign(prop.out_ids.begin() + 1, prop.out_ids.end());
    rec.confidence = prop.confidence;
    rec.drafter_nan = prop.nan;
    tokens.push_back(t);
    if (static_cast<int64_t>(tokens.size()) == opt.n_new) {  // final budget round: no verify
      rec.emitted = 1;
    } else {
      const int64_t left = opt.n_new - static_cast<int64_t>(tokens.size());
      int t_cap = static_cast<int>(std::min<int64_t>({k + 1, depth, opt.tmax}));
      // A scheduled depth acts as the depth knob (no carry when it shortens a round, §5.2).
      if (opt.auto_depth) t_cap = scheduled_depth(prop.confidence, *opt.auto_depth, t_cap);
      const int T = static_cast<int>(std::min<int64_t>(t_cap, left));
      const int kv = T - 1;
      const std::vector<int32_t> x(prop.out_ids.begin(), prop.out_ids.begin() + T);
      int32_t next = -1;
      const int c = accept_walk(x, engine.verify(x), kv, &next);
      // S6: the first accepted draft x[j] that is a stop id ends the run after x[0..j];
      // x[j] is not consumed (commit j, ring rows m0 .. m0 + j - 1), as in plain greedy.
      const auto stop = std::find_if(x.begin() + 1, x.begin() + 1 + c,
                                     [&](int32_t d) { return is_stop(opt.stop_ids, d); });
      const int j = static_cast<int>(stop - x.begin());  // c + 1: no accepted stop
      r.stopped = j <= c;
      engine.commit(r.stopped ? j : c + 1);
      tokens.insert(tokens.end(), x.begin() + 1, x.begin() + std::min(j, c) + 1);
      carry = c == kv && T < t_cap;
      rec.accepts = c;  // the verifier's ruling, also in a stopped round
      rec.verified = std::min(c + 1, kv);
      rec.t_batch = T;
      rec.t_cap = t_cap;
      rec.emitted = 1 + std::min(j, c);
      t = next;
    }
    rec.round_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    r.rounds.push_back(std::move(rec));
    if (opt.on_round) opt.on_round(r.rounds.back(), r);
    if (r.stopped) break;  // S6: no further proposal
  }
  return r;
}

}  // namespace dsv4
