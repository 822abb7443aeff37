// Lossless speculative sampling (SPECDECODE.md Q8; the accept/reject rule of Leviathan
// et al. 2023 and Chen et al. 2023, "speculative sampling"), written against a minimal
// interface so the sampler of issue 14 (its sampling_probabilities and its
// position-keyed sampling_uniform) can feed it: probability vectors over the vocabulary
// (each summing to 1; p = the target's sampling distribution of a verify row, q = the
// drafter's distribution of that draft) and uniforms in [0, 1) in, a token out.
//
// General rule (a draft d drawn from q): accept d with probability min(1, p(d) / q(d));
// on rejection draw from the residual norm(max(0, p - q)). The emitted token is
// distributed exactly as p.
//
// Point-mass form (deterministic drafts: DSpark's greedy Markov chain and the replay
// drafter, q = delta_d): with q(d) = 1 the rule accepts d with probability p(d), and the
// residual is p without d, renormalized. This is realized by coupling with plain
// sampling: the row's token is inverse_cdf(p, u) with the uniform plain sampling would
// use at that position, and d is accepted iff it equals that token. P(accept) = p(d) and
// a rejection emits inverse_cdf(p, u) conditioned on != d, i.e. the residual; and the
// token is plain sampling's own, so the same seed gives the same tokens at every verify
// depth and split (the greedy identity law with "argmax" read as "inverse CDF at u").
// The round loop then stays accept_walk over the rows' sampled tokens (spec_rounds.h).
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {

// The first id whose cumulative probability exceeds u (ascending ids); the last id of
// positive probability when rounding leaves the total just below u.
int32_t inverse_cdf(const std::vector<double>& p, double u);

struct SampledVerdict {
  bool accepted = false;
  int32_t token = -1;  // d when accepted, else the residual draw
};

// General rule for a draft d ~ q: u_accept decides acceptance, u_residual the residual
// draw. Refuses (invariant) q(d) == 0: d cannot have been drawn from q.
SampledVerdict accept_sampled_draft(const std::vector<double>& p, const std::vector<double>& q,
                                    int32_t d, double u_accept, double u_residual);

// Point-mass form for a deterministic draft d, coupled with plain sampling at uniform u.
SampledVerdict accept_point_mass(const std::vector<double>& p, int32_t d, double u);

}  // namespace dsv4
