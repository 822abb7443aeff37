// Speculative rounds at a scripted acceptance length on the whole model (issue 15,
// deliverable 4): the DSpark drafter proposes for real, the trunk verifies the head token
// and all B drafts (T = B + 1 rows, the full depth), the head's argmax comes back to the
// host, and round k commits L_k = scripted_accept_len(k, X) positions (the replay drafter's
// accept_len rule) and writes the drafter's rings for them — so ms per generated token is
// what a run with mean acceptance length X costs, whatever the synthetic drafts say.
#pragma once
#include <cstdint>

#include "stage/drafter.h"
#include "stage/stage.h"

namespace dsv4 {

struct ScriptedRounds {
  int64_t accept_len_milli = 0;  // X * 1000
  int rounds = 0;                // timed rounds
  int64_t tokens = 0;            // emitted by them
  double total_ms = 0;           // their wall time, each round ending with its commit
  double ms_per_token() const { return total_ms / static_cast<double>(tokens); }
  double tokens_per_round() const { return static_cast<double>(tokens) / rounds; }
};

// `stage` (drafter on, filled to its start position) and `drafter` (primed) advance by the
// committed positions; h / logits / taps are backend buffers of B + 1 rows.
ScriptedRounds time_scripted_rounds(Stage& stage, Drafter& drafter, Ops& ops, int64_t accept_len_milli,
                                    int warmup, int rounds, int64_t vocab, float* h, float* logits,
                                    float* taps);

}  // namespace dsv4
