// The replay drafter (issue 6 item 4): proposes the tokens of a recorded plain greedy
// run, optionally corrupted at chosen draft indices, so identity tests reach full
// acceptance and a rejection at every index, and benchmarks a controlled acceptance
// length (issue 15). Selected by `--drafter replay:SPEC`:
//
//   replay:FILE                      FILE is a --dump-logits JSON or {"tokens": [...]}
//   replay:FILE:corrupt=R1,R2,...    draft index r (1-based, 1..B) of EVERY proposal is
//                                    replaced by (recorded + 1) mod vocab
//   replay:FILE:confidence=C1,..,CB[/C1,..,CB...]   the confidence logits of proposal k
//                                    are group k mod (number of groups) (default all 0)
//   replay:FILE:accept_len=X         X in [1, B + 1], up to 3 decimals: proposal k is
//                                    corrupted at draft index L_k = floor((k+1) X) -
//                                    floor(k X) (none when L_k = B + 1), so a round at full
//                                    depth emits L_k tokens and the mean over any n
//                                    consecutive rounds is within 1/n of X (not with corrupt)
//
// Options follow the file, each after a ':', in any order, each at most once; they are
// parsed from the right, so a file name may hold ':'. The recorded sequence is the
// file's "prompt" (optional) followed by its "tokens"; entry m is the token at position
// m. The draft for position m is entry m; positions past the recording draft the
// fallback token (the DSpark noise id). Proposals are counted from the last reset() (a
// new sequence). Rings are not used: prime / write_rings do nothing.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stage/drafter.h"

namespace dsv4 {

inline constexpr std::string_view kReplayPrefix = "replay:";  // --drafter replay:SPEC

// What the replay drafter changes in its proposals.
struct ReplayScript {
  std::vector<int> corrupt;                    // 1-based draft indices, ascending, distinct
  std::vector<std::vector<float>> confidence;  // per proposal k: group k mod size; empty: 0
  int64_t accept_len_milli = 0;                // accept_len X as round(1000 X); 0: unset
};

// An acceptance length: a decimal >= 1 with at most 3 decimals ("2.8"), as thousandths
// (2800); throws Error naming `what` otherwise.
int64_t parse_accept_len_milli(const std::string& value, const std::string& what);

// The tokens round k (0-based) emits at a scripted acceptance length of x_milli / 1000
// tokens per round: L_k = floor((k+1) X) - floor(k X), so the mean over any n consecutive
// rounds is within 1/n of X (the replay drafter's accept_len, dsv4-bench-decode's
// --accept-lens).
inline int scripted_accept_len(int64_t k, int64_t x_milli) {
  return static_cast<int>((k + 1) * x_milli / 1000 - k * x_milli / 1000);
}

struct ReplaySpec {
  std::string file;
  ReplayScript script;
};

// Parses the text after "replay:"; throws Error naming the culprit.
ReplaySpec parse_replay_spec(const std::string& text);
// Reads the recorded sequence (prompt ++ tokens) of a replay file.
std::vector<int32_t> read_replay_tokens(const std::string& file);

class ReplayDrafter final : public Drafter {
 public:
  ReplayDrafter(std::vector<int32_t> sequence, ReplayScript script, int block_size,
                int64_t vocab, int32_t fallback);

  int block_size() const override { return B_; }
  void prime(const float*, int64_t) override {}
  void write_rings(const float*, int64_t, int) override {}
  Proposal propose(int32_t head, int64_t anchor) override;
  void reset() override { proposals_ = 0; }

 private:
  std::vector<int32_t> seq_;
  ReplayScript script_;
  int64_t proposals_ = 0;
  int B_;
  int64_t vocab_;
  int32_t fallback_;
};

}  // namespace dsv4
