// The run's layer split (ARCHITECTURE.md "Ranks and roles", CHECKPOINT.md §5.7): the
// config's explicit ranges, validated, or the split minimizing the largest rank's
// resident bytes from the byte census. Every rank computes the same plan from the
// checkpoint's config and index alone (no shard is opened).
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "model/census.h"
#include "model/checkpoint.h"
#include "model/placement.h"

namespace dsv4 {

struct PlacementBytes {
  std::vector<uint64_t> layers;  // resident bytes of trunk layer l
  uint64_t first = 0;            // rank 0's extras: embed.weight
  uint64_t last = 0;             // rank P-1's: head, norm, hc_head_* (+ drafter, its embed copy)
  // The same bytes by census class (the rank logs its resident bytes by class).
  std::vector<std::map<ByteClass, uint64_t>> layer_classes;
  std::map<ByteClass, uint64_t> first_classes, last_classes;
};

// From the census of the checkpoint's config with the recipes its index names (C1).
PlacementBytes placement_bytes(const Checkpoint& ckpt, bool drafter);

// `listed` empty: balance_layers; otherwise validate_ranges. Throws Error starting
// with "placement:" (P > L, empty / overlapping / out-of-bounds ranges, count != P).
std::vector<LayerRange> plan_placement(const std::vector<LayerRange>& listed,
                                       const PlacementBytes& bytes, int ranks);

}  // namespace dsv4
