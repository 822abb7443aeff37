// Token sampling on rank 0 from the logits row the head returns (issue 14): temperature,
// then top-k, then top-p, then min-p (HF generate's order), over a counter-based random
// stream keyed by (seed, position), so a token depends only on its logits row, the seed
// and its position: the same seed gives the same tokens on every split (law 1 gives the
// same logits). Temperature 0 is greedy and never reaches here: the coordinator keeps the
// head's argmax, bit-identical to the greedy engine. A lossless speculative sampler
// (SPECDECODE Q8, issue 15) builds on sampling_probabilities and sampling_uniform.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsv4 {

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy
  int top_k = 0;             // keep the k most probable tokens; 0: all
  double top_p = 1.0;        // keep the smallest most-probable set of mass >= top_p; 1: all
  double min_p = 0.0;        // keep tokens of probability >= min_p * the largest; 0: all
  uint64_t seed = 0;
  bool greedy() const { return temperature == 0.0; }
};

// Refuses values outside their ranges (temperature >= 0 and finite, top_k >= 0, top_p in
// (0, 1], min_p in [0, 1]); `where` prefixes each field ("" for flags, "request: ").
void check_sampling(const SamplingParams& p, const std::string& where);

// The distribution a sampled token is drawn from: [vocab] probabilities summing to 1,
// zero outside the kept set. Ties in probability rank by the lower id. Needs
// temperature > 0; a logits row of NaN is the caller's (the head refuses it, S9).
std::vector<double> sampling_probabilities(const float* logits, int64_t vocab,
                                           const SamplingParams& p);

// u in [0, 1) for the token at `position` (SplitMix64 finalizer of seed and position).
double sampling_uniform(uint64_t seed, int64_t position);

// The token at `position`: the first id (ascending) whose cumulative probability exceeds
// sampling_uniform(seed, position) (inverse CDF over sampling_probabilities).
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p,
                     int64_t position);

}  // namespace dsv4
