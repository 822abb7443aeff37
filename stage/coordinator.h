// Rank 0's generation loop (ARCHITECTURE.md "Ranks and roles"): admission, prefill (in
// chunks of prefill_chunk rows), argmax from the head rank, then greedy decode steps or
// speculative rounds (propose, verify, commit; SPECDECODE.md §5.1), each header sent to
// every rank.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/control_plane.h"
#include "stage/pipeline.h"
#include "stage/sampler.h"
#include "stage/spec_rounds.h"

namespace dsv4 {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // p0 token ids, p0 >= 1
  int64_t max_new = 1;          // n_new tokens to emit
  bool keep_logits = false;     // return the logits row that chose each token
  int spec_tmax = 0;            // 0: plain greedy; else B + 1: speculative rounds (SPECDECODE §5)
  int depth_cap = 0;            // speculative: verify depth cap, <= 0 none (§5.2)
  const VerifyCosts* auto_depth = nullptr;  // speculative: spec_depth auto (depth_schedule.h)
  std::vector<int32_t> stop_ids;  // S6: emitting one ends the run (it is not consumed)
  // Speculative: called after each round's record (SpecOptions::on_round; logging).
  std::function<void(const SpecRound&, const SpecResult&)> on_round;
  SamplingParams sampling;        // greedy by default; else rank 0 samples the logits rows
  // Called with each token as it is committed; returning false ends the run after it
  // (a stop string matched, or the client went away). Speculative runs call it after
  // the last round.
  std::function<bool(int32_t token)> on_token;
};

struct GenerationResult {
  std::vector<int32_t> tokens;              // n_new greedy tokens, fewer after a stop id
  std::vector<std::vector<float>> logits;   // [n_new][V] when asked; row 0 from prefill
  double prefill_ms = 0, decode_ms = 0;     // decode_ms: all decode steps together
  int64_t decode_steps = 0;                 // plain decode steps, or verify rounds
  std::vector<SpecRound> rounds;            // speculative: every round record (R-A4)
  bool ended_by_carry = false;
  bool stopped = false;                     // the last token is a stop id (S6)
  bool ended_by_caller = false;             // on_token returned false
};

// Refuses a request the engine cannot serve, naming the numbers (SPECDECODE.md S5:
// 1 <= p0 <= max_seq and p0 + n_new - 1 <= max_seq; prompt and stop ids in [0, V);
// sampling in range).
void check_admission(const GenerationRequest& req, int64_t max_seq, int64_t vocab);

class Coordinator {
 public:
  // control is null on a single-rank run. prefill_chunk: the rows of one prefill
  // operation (Stage::chunk_rows of every stage); a longer prompt goes as consecutive
  // chunk operations, so stage r runs chunk c + 1 while stage r + 1 runs chunk c. 0: whole.
  Coordinator(Pipeline& pipeline, ControlPlane* control, int64_t max_seq, int64_t vocab,
              int64_t prefill_chunk = 0)
      : pipeline_(pipeline), control_(control), max_seq_(max_seq), vocab_(vocab),
        prefill_chunk_(prefill_chunk) {}

  GenerationResult generate(const GenerationRequest& req);
  // Ends the run on every rank (they leave Pipeline::serve).
  void stop();

 private:
  OpResult run(const OpHeader& header);  // header to every rank, then this rank's part

  Pipeline& pipeline_;
  ControlPlane* control_;
  int64_t max_seq_, vocab_, prefill_chunk_;
  int64_t seq_ = 0;
};

}  // namespace dsv4
