// The bytes one batch-1 decode step reads (CHECKPOINT.md §5.3), the physical floor of a
// step at a given memory bandwidth: every dense tensor of every trunk layer, K of the E
// routed experts per layer (without input_scale, ignored on load: C3), one tid2eid row
// in hash layers, the whole head and one embedding row, never the drafter; plus the
// cache bytes that grow with the context (this engine's caches hold f32 rows).
#pragma once
#include <cstdint>
#include <map>

#include "model/census.h"
#include "model/config.h"

namespace dsv4 {

// Bytes of one census entry a decode step reads.
uint64_t step_read_bytes(const CensusEntry& e, const ModelConfig& c);
// The weight bytes of one step by byte class (trunk experts of the given recipe).
std::map<ByteClass, uint64_t> step_weight_bytes(const ModelConfig& c, ExpertRecipe trunk_experts);

// Cache bytes one decode row at position `pos` reads over all trunk layers: the window
// ring (min(pos, W) rows of D), the compressed rows attention reads (r = 4: the indexer's
// top-k of the blocks; other r: every block) and the indexer keys it scores (all blocks
// of every r = 4 layer).
struct ContextBytes {
  uint64_t ring = 0, compressed = 0, indexer_keys = 0;
  uint64_t total() const { return ring + compressed + indexer_keys; }
};
ContextBytes step_context_bytes(const ModelConfig& c, int64_t pos);

}  // namespace dsv4
