// SPECDECODE.md §5-§7 round loop gates, in process on the CPU backend (P = 1 and a
// 2-stage pipeline, every rank's real Pipeline): G6 greedy identity (R-I1) with the DSpark
// and the replay drafter at depth caps 1, 2 and tmax, state identity after every round
// (R-S6 trunk classes vs a plain sequential decode of the committed tokens; with the
// DSpark drafter, R-S7 rings vs a plain run writing a ring row at every position), G8 forced rejection at every draft index, G9 budget
// truncation and carry, G10 T = 1 rounds, the §5.5 accounting identities, and S6 stop
// ids (the plain stream cut after its first stop id, the stop token not consumed), and
// spec_depth auto (each round's T from scripted confidences).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "drafter_harness.h"
#include "base/error.h"
#include "stage/coordinator.h"
#include "stage/replay_drafter.h"
#include "stage/spec_rounds.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

const std::vector<LayerRange> kOneStage{{0, 7}};
const std::vector<LayerRange> kTwoStages{{0, 4}, {4, 7}};

// §5.5 accounting identities of a finished run; S6: a run that stopped at an accepted
// draft x[j] records emitted = j + 1 <= 1 + accepts in its last round, one that stopped at
// a head token (a round's `next` or the prefill argmax) has no record for it.
void check_accounting(const SpecResult& r, const SpecOptions& opt) {
  const auto n = static_cast<int64_t>(r.tokens.size());
  CHECK(r.stopped == (!r.tokens.empty() && is_stop(opt.stop_ids, r.tokens.back())));
  for (int64_t i = 0; i + 1 < n; ++i) CHECK_FALSE(is_stop(opt.stop_ids, r.tokens[i]));
  CHECK(r.stopped_at_head <= r.stopped);
  if (r.rounds.empty()) {  // only a stop at the prefill argmax ends a run before any round
    CHECK((r.stopped_at_head && n == 1));
    return;
  }
  const bool stopped_in_round = r.stopped && !r.stopped_at_head && !r.ended_by_carry;
  int64_t emitted = 0;
  for (size_t i = 0; i < r.rounds.size(); ++i) {
    const SpecRound& k = r.rounds[i];
    CAPTURE(i);
    emitted += k.emitted;
    if (i + 1 < r.rounds.size()) CHECK(r.rounds[i + 1].start_pos == k.start_pos + k.emitted);
    if (k.t_batch == 0) {  // the final budget round
      CHECK(i + 1 == r.rounds.size());
      CHECK(k.emitted == 1);
      continue;
    }
    CHECK((1 <= k.t_batch && k.t_batch <= k.t_cap && k.t_cap <= opt.tmax));
    CHECK(k.accepts <= k.t_batch - 1);
    if (stopped_in_round && i + 1 == r.rounds.size())
      CHECK((2 <= k.emitted && k.emitted <= 1 + k.accepts));
    else
      CHECK(k.emitted == 1 + k.accepts);
    CHECK(k.verified == std::min(k.accepts + 1, k.t_batch - 1));
    // R-A2: T is the structural cap, cut by the budget left after pushing the head token.
    const int64_t before = k.start_pos + 1 - opt.p0;
    CHECK(k.t_batch == std::min<int64_t>(k.t_cap, opt.n_new - before - 1));
  }
  CHECK(r.rounds.front().start_pos == opt.p0 - 1);
  CHECK(emitted + (r.ended_by_carry ? 1 : 0) + (r.stopped_at_head ? 1 : 0) == n);
  CHECK((r.stopped ? n <= opt.n_new : n == opt.n_new));
  const SpecRound& last = r.rounds.back();
  if (!r.stopped)
    CHECK(r.ended_by_carry ==
          (last.t_batch > 0 && last.accepts == last.t_batch - 1 && last.t_batch < last.t_cap));
}

struct Case {
  std::vector<int32_t> prompt;
  int64_t n_new = 1;
  int depth_cap = 0;
  std::vector<int> corrupt;  // replay drafter when non-empty or `replay`
  bool replay = false;
  const std::vector<LayerRange>* ranges = &kOneStage;
  std::vector<int32_t> stop_ids;  // S6
  std::vector<std::vector<float>> confidence;  // replay drafter: scripted confidences
  int64_t accept_len_milli = 0;                // replay drafter: scripted acceptance length
  const VerifyCosts* auto_depth = nullptr;     // spec_depth auto
};

// S6 in plain greedy: the stream up to and including its first stop id.
std::vector<int32_t> cut_at_stop(std::vector<int32_t> tokens, const std::vector<int32_t>& stop) {
  const auto it = std::find_if(tokens.begin(), tokens.end(),
                               [&](int32_t t) { return std::count(stop.begin(), stop.end(), t); });
  if (it != tokens.end()) tokens.erase(it + 1, tokens.end());
  return tokens;
}

// Runs one spec generation and its plain reference; checks identity after the run and
// state identity after every round. Returns the result for case-specific checks.
SpecResult run_case(Checkpoint& ckpt, Ops& ops, const Case& k) {
  const ModelConfig& c = ckpt.config();
  const int64_t p0 = static_cast<int64_t>(k.prompt.size());
  DraftRun greedy(ckpt, ops, *k.ranges);
  const std::vector<int32_t> full = plain_stream(greedy, k.prompt, k.n_new);
  const std::vector<int32_t> expect = cut_at_stop(full, k.stop_ids);

  std::vector<int32_t> recorded = k.prompt;
  recorded.insert(recorded.end(), full.begin(), full.end());
  ReplayDrafter replay(recorded, {k.corrupt, k.confidence, k.accept_len_milli}, c.dspark.block_size, c.vocab_size,
                       static_cast<int32_t>(c.dspark.noise_token_id));
  // The head rank's drafter proposes; the DSpark drafter also keeps the rings (R-S7),
  // which the replay drafter has none of.
  DraftRun spec(ckpt, ops, *k.ranges, k.replay ? &replay : nullptr), ref(ckpt, ops, *k.ranges);
  auto same_rings = [&] {
    if (!k.replay) CHECK(first_cache_difference(spec.drafter.ring_classes(), ref.drafter.ring_classes()) == "");
  };
  LocalEngine engine(spec);
  const int32_t head = spec.start(k.prompt);
  ref.start(k.prompt);

  SpecOptions opt;
  opt.p0 = p0;
  opt.n_new = k.n_new;
  opt.depth_cap = k.depth_cap;
  opt.tmax = c.dspark.block_size + 1;
  opt.stop_ids = k.stop_ids;
  opt.auto_depth = k.auto_depth;
  opt.on_round = [&](const SpecRound&, const SpecResult& so_far) {
    // The reference consumes the same committed tokens one plain step at a time (after
    // the final commit of a stopped run: every token but the stop).
    const int64_t pos = spec.pipe.last().pos();
    while (ref.pipe.last().pos() < pos) ref.plain_step(so_far.tokens.at(ref.pipe.last().pos() - p0));
    CHECK(first_cache_difference(spec.pipe.cache_classes(true), ref.pipe.cache_classes(true)) == "");
    same_rings();
  };
  const SpecResult r = spec_generate(engine, head, opt);
  CHECK(r.tokens == expect);
  CHECK(engine.proposals == r.rounds.size());  // S13: none after a carry round or a stop
  const int64_t consumed = static_cast<int64_t>(r.tokens.size()) - 1;  // all but the last
  CHECK(spec.pipe.last().pos() == p0 + consumed);
  while (ref.pipe.last().pos() < p0 + consumed) ref.plain_step(r.tokens.at(ref.pipe.last().pos() - p0));
  CHECK(first_cache_difference(spec.pipe.cache_classes(true), ref.pipe.cache_classes(true)) == "");
  same_rings();
  check_accounting(r, opt);
  return r;
}

// 20 prompts: 1 token, shorter and longer than W = 16, random and repetitive text.
std::vector<std::vector<int32_t>> prompts(int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  const int lengths[] = {1, 2, 3, 5, 7, 9, 12, 15, 16, 17, 20, 24, 30, 33, 40};
  for (int i = 0; i < 15; ++i) out.push_back(random_tokens(lengths[i], vocab, 1000 + i));
  for (int n : {4, 11, 18, 26, 36}) {  // repetitive: a short motif repeated
    std::vector<int32_t> p;
    const std::vector<int32_t> motif = random_tokens(3, vocab, 77 + n);
    while (static_cast<int>(p.size()) < n) p.push_back(motif[p.size() % motif.size()]);
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST_CASE("accept_walk: correction at the first mismatch, bonus after the last draft (§3.3)") {
  int32_t next = -1;
  CHECK(accept_walk({5, 6, 7, 8}, {6, 7, 9, 1}, 3, &next) == 2);
  CHECK(next == 9);
  CHECK(accept_walk({5, 6, 7}, {6, 7, 4}, 2, &next) == 2);  // all accepted: bonus a[kv]
  CHECK(next == 4);
  CHECK(accept_walk({5, 6}, {3, 6}, 1, &next) == 0);
  CHECK(next == 3);
  CHECK(accept_walk({5}, {8}, 0, &next) == 0);  // T = 1
  CHECK(next == 8);
}

TEST_CASE("G6 greedy identity with the DSpark drafter, depth caps 1, 2, tmax, P = 1 and 2") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int tmax = c.dspark.block_size + 1;
  const auto ps = prompts(c.vocab_size);
  const int64_t budgets[] = {1, 2, 5, 6, 7, 13};
  for (size_t i = 0; i < ps.size(); ++i) {
    for (int cap : {1, 2, tmax}) {
      Case k;
      k.prompt = ps[i];
      k.n_new = std::min<int64_t>(budgets[(i + cap) % 6], kMaxSeq - ps[i].size() + 1);
      k.depth_cap = cap;
      k.ranges = (i % 2) ? &kTwoStages : &kOneStage;
      CAPTURE(i);
      CAPTURE(cap);
      const SpecResult r = run_case(ckpt, *ops, k);
      if (cap == 1)  // G10: T = 1 rounds are plain decode through the batched path
        for (const SpecRound& rd : r.rounds)
          CHECK(rd.t_batch <= 1);
    }
  }
}

TEST_CASE("G6/G8 replay drafter: full acceptance, and rejection at each draft index r") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int B = c.dspark.block_size, tmax = B + 1;
  const auto ps = prompts(c.vocab_size);
  for (size_t i = 0; i < ps.size(); ++i) {  // always right: accepts == kv every round
    Case k;
    k.prompt = ps[i];
    k.n_new = std::min<int64_t>(20, kMaxSeq - ps[i].size() + 1);
    k.replay = true;
    k.depth_cap = (i % 3 == 0) ? 2 : tmax;
    k.ranges = (i % 2) ? &kTwoStages : &kOneStage;
    CAPTURE(i);
    for (const SpecRound& rd : run_case(ckpt, *ops, k).rounds)
      if (rd.t_batch > 0) CHECK(rd.accepts == rd.t_batch - 1);
  }
  for (int r = 1; r <= B; ++r) {  // corrupted at index r: accepts == r - 1 when kv >= r
    for (const auto& ranges : {&kOneStage, &kTwoStages}) {
      Case k;
      k.prompt = ps[static_cast<size_t>(r) * 3 % ps.size()];
      k.n_new = 17;
      k.replay = true;
      k.corrupt = {r};
      k.ranges = ranges;
      CAPTURE(r);
      int verify_rounds = 0;
      for (const SpecRound& rd : run_case(ckpt, *ops, k).rounds) {
        if (rd.t_batch == 0) continue;
        ++verify_rounds;
        const int kv = rd.t_batch - 1;
        CHECK(rd.accepts == (kv >= r ? r - 1 : kv));
        CHECK(rd.emitted == rd.accepts + 1);
      }
      CHECK(verify_rounds > 1);
    }
  }
}

TEST_CASE("G9 budget truncation and carry with the always-right drafter") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int tmax = c.dspark.block_size + 1;
  const std::vector<int32_t> prompt = random_tokens(9, c.vocab_size, 4242);
  int carries = 0;
  for (int64_t n_new = 1; n_new <= 3 * tmax + 2; ++n_new) {
    for (int cap : {0, 2, tmax}) {
      Case k;
      k.prompt = prompt;
      k.n_new = n_new;
      k.depth_cap = cap;
      k.replay = true;
      CAPTURE(n_new);
      CAPTURE(cap);
      const SpecResult r = run_case(ckpt, *ops, k);
      carries += r.ended_by_carry;
      if (n_new == 1) {  // one proposal, no verify, one record
        REQUIRE(r.rounds.size() == 1);
        CHECK(r.rounds[0].t_batch == 0);
      }
    }
  }
  CHECK(carries > 0);
}

// S6: stop ids chosen from an unstopped run's stream where the token first occurs, at a
// position that falls (a) on an accepted draft in the middle of a round, (b) on a round's
// `next` (bonus or correction; the next round's head), (c) on the prefill argmax.
TEST_CASE("S6 stop ids: spec tokens == plain greedy cut at the first stop, state of the emitted tokens") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const auto ps = prompts(c.vocab_size);
  for (bool replay : {true, false}) {
    int hits[3] = {0, 0, 0};  // (a), (b), (c)
    for (size_t i = 0; i < ps.size(); i += 3) {
      Case k;
      k.prompt = ps[i];
      k.n_new = std::min<int64_t>(20, kMaxSeq - ps[i].size() + 1);
      k.replay = replay;
      k.ranges = (i % 2) ? &kTwoStages : &kOneStage;
      CAPTURE(i);
      CAPTURE(replay);
      const SpecResult base = run_case(ckpt, *ops, k);
      const std::vector<int32_t>& s = base.tokens;
      const int64_t p0 = static_cast<int64_t>(k.prompt.size());
      // Stop candidates: (kind, stream index); the first of each kind whose token first
      // occurs there is run.
      std::vector<std::pair<int, int64_t>> picks{{2, 0}};
      for (size_t r = 0; r < base.rounds.size(); ++r) {
        const SpecRound& rd = base.rounds[r];
        const int64_t head = rd.start_pos + 1 - p0;  // stream index of x[0]
        if (rd.t_batch > 0 && rd.accepts >= 2) picks.push_back({0, head + 1});
        if (r + 1 < base.rounds.size()) picks.push_back({1, base.rounds[r + 1].start_pos + 1 - p0});
      }
      bool done[3] = {false, false, false};
      for (const auto& [kind, idx] : picks) {
        const auto first = std::find(s.begin(), s.end(), s[static_cast<size_t>(idx)]) - s.begin();
        if (done[kind] || first != idx) continue;
        done[kind] = true;
        ++hits[kind];
        CAPTURE(kind);
        CAPTURE(idx);
        Case stopped = k;
        // A second stop id that the stream never emits changes nothing.
        int32_t unused = 0;
        while (std::count(s.begin(), s.end(), unused)) ++unused;
        stopped.stop_ids = {unused, s[static_cast<size_t>(idx)]};
        const SpecResult r = run_case(ckpt, *ops, stopped);
        REQUIRE(static_cast<int64_t>(r.tokens.size()) == idx + 1);
        CHECK(r.stopped);
        CHECK(r.stopped_at_head == (kind != 0));
        if (kind == 2) CHECK(r.rounds.empty());
        if (kind == 0) CHECK(r.rounds.back().emitted == 2);  // x[0], x[1] = the stop
      }
    }
    CAPTURE(replay);
    CHECK(hits[1] > 0);
    CHECK(hits[2] > 0);
    if (replay) CHECK(hits[0] > 0);  // full acceptance: every round has accepted drafts
  }
}

TEST_CASE("S6 stop ids outside [0, V) are refused by key") {
  GenerationRequest req;
  req.prompt = {1, 2};
  req.stop_ids = {3, 64};
  try {
    check_admission(req, 16, 64);
    FAIL("a stop id >= vocab was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("stop_ids[1]: token id 64 outside [0, 64)") != std::string::npos);
  }
  req.stop_ids = {0, 63};
  CHECK_NOTHROW(check_admission(req, 16, 64));
}

// spec_depth auto (stage/depth_schedule.h) end to end: the replay drafter's scripted
// confidence groups (proposal k uses group k mod 5) choose each round's t_cap by the
// rule, whatever the drafts' fate; greedy identity and state identity hold after every
// round at every chosen T (run_case), with full acceptance and with rejections.
TEST_CASE("spec_depth auto: scripted confidences set each round's T by the rule; identity holds") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const VerifyCosts costs = builtin_verify_costs();
  auto logit = [](double p) { return static_cast<float>(std::log(p / (1 - p))); };
  auto all = [&](double p) { return std::vector<float>(c.dspark.block_size, logit(p)); };
  // Under the built-in table (worked in test_depth_schedule.cpp): every draft at 0.9 ->
  // T = 6, 0.5 -> 4, 0.05 -> 2, 0.01 -> 1; 0.95, 0.95, 0.03, 0.5, 0.5 -> 3.
  const std::vector<std::vector<float>> groups{
      all(0.9), all(0.5), all(0.05), all(0.01), {logit(0.95), logit(0.95), logit(0.03), 0, 0}};
  const int expected[] = {6, 4, 2, 1, 3};
  const auto ps = prompts(c.vocab_size);
  for (const std::vector<int>& corrupt : {std::vector<int>{}, std::vector<int>{2}}) {
    for (const auto& ranges : {&kOneStage, &kTwoStages}) {
      Case k;
      k.prompt = ps[corrupt.empty() ? 5 : 11];
      k.n_new = 40;
      k.replay = true;
      k.corrupt = corrupt;
      k.confidence = groups;
      k.auto_depth = &costs;
      k.ranges = ranges;
      CAPTURE(corrupt.size());
      const SpecResult r = run_case(ckpt, *ops, k);
      std::set<int> depths;
      for (size_t i = 0; i < r.rounds.size(); ++i) {
        const SpecRound& rd = r.rounds[i];
        if (rd.t_batch == 0) continue;
        CAPTURE(i);
        CHECK(rd.t_cap == expected[i % 5]);
        depths.insert(rd.t_batch);
        if (corrupt.empty()) CHECK(rd.accepts == rd.t_batch - 1);
      }
      CHECK(depths.size() >= 4);
    }
  }
}

// Part 4 of issue 15: the replay drafter's accept_len X gives rounds of floor(X) or
// ceil(X) emitted tokens whose mean over the full-depth rounds is within 1 / n of X,
// with greedy and state identity (run_case), for the bands 2.8, 3.5 and 5.7.
TEST_CASE("replay accept_len 2.8, 3.5, 5.7: mean tokens per round at full depth; identity holds") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const auto ps = prompts(c.vocab_size);
  for (const int64_t milli : {2800, 3500, 5700}) {
    Case k;
    k.prompt = ps[3];  // 5 tokens
    k.n_new = kMaxSeq - 5;
    k.replay = true;
    k.accept_len_milli = milli;
    k.ranges = milli == 3500 ? &kTwoStages : &kOneStage;
    CAPTURE(milli);
    const SpecResult r = run_case(ckpt, *ops, k);
    int full = 0, emitted = 0;
    for (const SpecRound& rd : r.rounds) {
      if (rd.t_batch == 0 || rd.t_batch < rd.t_cap) continue;  // budget-truncated
      CHECK((rd.emitted == milli / 1000 || rd.emitted == (milli + 999) / 1000));
      ++full;
      emitted += rd.emitted;
    }
    REQUIRE(full >= 8);
    CHECK(std::abs(1000.0 * emitted / full - static_cast<double>(milli)) <= 1000.0 / full);
  }
}
