#include "bench/scripted_rounds.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/error.h"
#include "stage/replay_drafter.h"

namespace dsv4 {

ScriptedRounds time_scripted_rounds(Stage& stage, Drafter& drafter, Ops& ops, int64_t accept_len_milli,
                                    int warmup, int rounds, int64_t vocab, float* h, float* logits,
                                    float* taps) {
  const int T = drafter.block_size() + 1;
  if (accept_len_milli < 1000 || accept_len_milli > 1000 * int64_t{T})
    throw Error(cat("--accept-lens: ", accept_len_milli / 1000.0, " outside [1, block size + 1 = ", T, "]"));
  std::vector<int32_t> next(static_cast<size_t>(T));
  int32_t head = 17;  // any valid id: the synthetic weights' tokens mean nothing
  ScriptedRounds out;
  out.accept_len_milli = accept_len_milli;
  for (int k = 0; k < warmup + rounds; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t pos = stage.pos();
    const Proposal prop = drafter.propose(head, pos - 1);
    stage.verify(prop.out_ids, h, taps);
    stage.head_logits(h, T, logits);
    ops.argmax(logits, T, vocab, next.data());
    const int n = std::min(T, scripted_accept_len(k, accept_len_milli));
    stage.commit(n);
    drafter.write_rings(taps, pos, n);
    head = std::clamp<int32_t>(next[static_cast<size_t>(n - 1)], 0, static_cast<int32_t>(vocab - 1));
    ops.synchronize();
    if (k < warmup) continue;
    out.total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.tokens += n;
    ++out.rounds;
  }
  return out;
}

}  // namespace dsv4
