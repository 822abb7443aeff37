// Rank 0's speculative round loop (SPECDECODE.md §5.1, R-A1..R-A4): proposal, verify,
// accept walk (§3.3), commit, round records. Written once against SpecEngine so the
// coordinator (messages through the pipeline) and in-process tests drive the same loop.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "stage/depth_schedule.h"
#include "stage/drafter.h"

namespace dsv4 {

// What a round needs from the engine. The calls come in the order of §5.1.
class SpecEngine {
 public:
  virtual ~SpecEngine() = default;
  // propose(seq, head token, m0) to the head stage (S13); anchor = m0 - 1.
  virtual Proposal propose(int32_t head, int64_t anchor) = 0;
  // verify(x) on every stage; returns the trunk argmax of each of the T rows (R-V2), or
  // with sampling each row's token as plain sampling draws it (stage/spec_sampling.h).
  virtual std::vector<int32_t> verify(const std::vector<int32_t>& x) = 0;
  // commit(n) on every stage, then the drafter ring rows of the committed positions
  // (R-S5); the round opened by the last verify.
  virtual void commit(int n) = 0;
};

// §5.5 R-A4: one round record.
struct SpecRound {
  int64_t start_pos = 0;            // m0 - 1 (the anchor)
  std::vector<int32_t> drafts;      // all B drafts of the proposal
  int accepts = 0;                  // c
  int verified = 0;                 // min(c + 1, kv)
  int t_batch = 0;                  // T (0 in the final budget round)
  int t_cap = 0;                    // structural ceiling (0 in the final budget round)
  std::vector<float> confidence;    // the proposal's B confidence logits
  int emitted = 0;                  // 1 + c (1 in the final budget round)
  double round_us = 0;              // proposal + verify + commit + ring advance
  bool drafter_nan = false;         // S9: drafts were replaced by the noise id
};

struct SpecResult {
  std::vector<int32_t> tokens;      // n_new tokens, == plain greedy (R-I1)
  std::vector<SpecRound> rounds;
  bool ended_by_carry = false;      // the last token was a carried bonus (no record)
  bool stopped = false;             // S6: the last token is a stop id
  bool stopped_at_head = false;     // S6: ... emitted as a round's head (a previous round's
                                    // `next`, or the prefill argmax): no record
};

// S6: whether `token` is one of the run's stop ids.
bool is_stop(const std::vector<int32_t>& stop_ids, int32_t token);

// §3.3 accept walk over verify argmaxes a[0..T-1] of x = [t, d1..d_kv]: returns c (the
// accepted drafts) and sets *next to the next round's head token.
int accept_walk(const std::vector<int32_t>& x, const std::vector<int32_t>& a, int kv,
                int32_t* next);

struct SpecOptions {
  int64_t p0 = 0;                   // prompt length (state.pos after prefill)
  int64_t n_new = 1;                // tokens to emit
  int depth_cap = 0;                // <= 0: none; else max(1, depth_cap) (§5.2)
  int tmax = 0;                     // B + 1
  // spec_depth auto: each round's t_cap is scheduled_depth() of its proposal's confidences
  // under the structural ceiling (stage/depth_schedule.h); null: the fixed depth_cap.
  const VerifyCosts* auto_depth = nullptr;
  std::vector<int32_t> stop_ids;    // S6: generation ends after emitting one; empty: none
  // Called after every round's record is pushed (state checks in tests, logging).
  std::function<void(const SpecRound&, const SpecResult&)> on_round;
};

// §5.1: `head` is the prefill argmax (the token for position p0). Prefill, the tap seed
// and the ring prime have already run.
SpecResult spec_generate(SpecEngine& engine, int32_t head, const SpecOptions& opt);

}  // namespace dsv4
