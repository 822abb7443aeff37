// Splitting trunk layers [0, L) into P contiguous ranges (ARCHITECTURE.md "Ranks and
// roles", CHECKPOINT.md §5.7): by default minimizing the largest rank's resident
// bytes (rank 0 adds embed, rank P-1 the head and the drafter), or as listed.
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {

struct LayerRange {
  int begin = 0, end = 0;  // [begin, end)
};

// layer_bytes[l] for l < L; extra_first/extra_last are the globals of rank 0 / P-1.
// Throws Error when P < 1 or P > L.
std::vector<LayerRange> balance_layers(const std::vector<uint64_t>& layer_bytes, int ranks,
                                       uint64_t extra_first, uint64_t extra_last);

// Validates explicit ranges: P of them, contiguous, non-empty, covering [0, L) in order.
// Throws Error naming the offending range.
void validate_ranges(const std::vector<LayerRange>& ranges, int n_layers, int ranks);

}  // namespace dsv4
