// Confidence-scheduled verify depth (`spec_depth: auto`; SPECDECODE.md Q3, S3: the
// scheduler only changes T, never the emitted tokens, §6.5).
//
// Confidence logit i of a proposal estimates the chance that draft i+1 is accepted given
// drafts 1..i were (R-D9), so the prefix survival
//     s_t = prod_{i < t} sigmoid(confidence[i])            t = 1..B
// estimates P(drafts 1..t all accepted). A round of T verify rows (kv = T - 1 drafts)
// emits 1 + c tokens, c = accepted drafts, so it emits in expectation
//     E(T) = 1 + sum_{t=1}^{T-1} s_t
// and costs cost(T) = propose_ms + verify_ms[T] + commit_ms (a VerifyCosts table).
// The rule: T = the smallest T in [1, ceiling] that maximizes E(T) / cost(T), the
// expected tokens per unit time of the round. A non-finite confidence (S9: the drafts
// are noise) counts as survival 0, so such a round verifies T = 1.
#pragma once
#include <string>
#include <vector>

namespace dsv4 {

// Per-T round costs, from the benchmark (bench/spec_costs.sh writes the file; format in
// bench/README.md) or built in. Only ratios matter, so any unit works.
struct VerifyCosts {
  double propose_ms = 0, commit_ms = 0;
  std::vector<double> verify_ms;   // [T - 1]: one verify round of T rows, T = 1..size
  std::string source;              // the file, or "built-in"
  int max_depth() const { return static_cast<int>(verify_ms.size()); }
  double round_ms(int T) const;    // propose + verify(T) + commit; T in [1, max_depth]
};

// The built-in table (used without spec_costs), in units of one verify row: propose 0.2,
// verify(T) = 1 + 0.06 (T - 1), commit 0.02, T = 1..16. It models a weight-streaming
// (bandwidth-bound) GPU step, where T rows read the weights once (see bench/README.md).
VerifyCosts builtin_verify_costs();
// Reads a costs file; throws Error naming the file and the field.
VerifyCosts read_verify_costs(const std::string& path);
// `spec_costs` value: "" = built-in.
VerifyCosts load_verify_costs(const std::string& path);

std::vector<double> prefix_survival(const std::vector<float>& confidence);  // s_1 .. s_B
double expected_tokens(const std::vector<double>& survival, int T);         // E(T)
// The rule above; ceiling >= 1 (the structural t_cap) and <= costs.max_depth().
int scheduled_depth(const std::vector<float>& confidence, const VerifyCosts& costs, int ceiling);

}  // namespace dsv4
