// Contiguous layer split minimizing the largest rank's resident bytes (CHECKPOINT.md §5.7,
// ARCHITECTURE.md "Ranks and roles").
#include "model/placement.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace dsv4 {

namespace {

void check_rank_count(int n_layers, int ranks) {
  if (ranks < 1) throw Error(cat("placement: ", ranks, " ranks; at least 1 is needed"));
  if (ranks > n_layers)
    throw Error(cat("placement: ", ranks, " ranks for ", n_layers,
                    " trunk layers; every rank needs at least one layer (P <= L)"));
}

}  // namespace

std::vector<LayerRange> balance_layers(const std::vector<uint64_t>& layer_bytes, int ranks,
                                       uint64_t extra_first, uint64_t extra_last) {
  const int L = static_cast<int>(layer_bytes.size());
  check_rank_count(L, ranks);
  const int P = ranks;
  std::vector<uint64_t> prefix(static_cast<size_t>(L) + 1, 0);
  for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + layer_bytes[static_cast<size_t>(l)];
  // Resident bytes of rank r holding layers [i, j).
  auto cost = [&](int r, int i, int j) {
    return prefix[j] - prefix[i] + (r == 0 ? extra_first : 0) + (r == P - 1 ? extra_last : 0);
  };
  constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
  // best[r][i]: the smallest possible largest rank for ranks r..P-1 holding layers [i, L),
  // each rank non-empty.
  std::vector<std::vector<uint64_t>> best(static_cast<size_t>(P),
                                          std::vector<uint64_t>(static_cast<size_t>(L) + 1, kInf));
  for (int i = 0; i < L; ++i) best[P - 1][i] = cost(P - 1, i, L);
  for (int r = P - 2; r >= 0; --r)
    for (int i = 0; i < L; ++i)
      for (int j = i + 1; j <= L - (P - 1 - r); ++j)
        if (best[r + 1][j] != kInf)
          best[r][i] = std::min(best[r][i], std::max(cost(r, i, j), best[r + 1][j]));
  const uint64_t optimum = best[0][0];
  DSV4_CHECK(optimum != kInf, "placement of ", L, " layers on ", P, " ranks");

  // Among the optimal splits take the earliest cuts: each rank ends at the first layer
  // that still lets the remaining ranks stay within the optimum.
  std::vector<LayerRange> out;
  int i = 0;
  for (int r = 0; r < P - 1; ++r) {
    int j = i + 1;
    while (!(cost(r, i, j) <= optimum && best[r + 1][j] <= optimum)) ++j;
    DSV4_CHECK(j <= L - (P - 1 - r), "cut of rank ", r);
    out.push_back(LayerRange{i, j});
    i = j;
  }
  out.push_back(LayerRange{i, L});
  return out;
}

void validate_ranges(const std::vector<LayerRange>& ranges, int n_layers, int ranks) {
  check_rank_count(n_layers, ranks);
  if (static_cast<int>(ranges.size()) != ranks)
    throw Error(cat("placement: ", ranges.size(), " layer ranges listed for ", ranks, " ranks"));
  int expected_begin = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    const LayerRange& g = ranges[r];
    const std::string which = cat("placement: rank ", r, " range [", g.begin, ", ", g.end, ")");
    if (g.begin < 0 || g.end > n_layers)
      throw Error(cat(which, " lies outside the trunk layers [0, ", n_layers, ")"));
    if (g.begin >= g.end) throw Error(cat(which, " is empty"));
    if (g.begin < expected_begin)
      throw Error(cat(which, " overlaps the previous rank's range, which ends at ", expected_begin));
    if (g.begin > expected_begin)
      throw Error(cat(which, " leaves layers [", expected_begin, ", ", g.begin, ") unassigned"));
    expected_begin = g.end;
  }
  if (expected_begin != n_layers)
    throw Error(cat("placement: layers [", expected_begin, ", ", n_layers,
                    ") are assigned to no rank"));
}

}  // namespace dsv4
