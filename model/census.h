// The tensor census of CHECKPOINT.md §2: every tensor name, dtype and shape a
// checkpoint of a given config and variant holds, and the byte census by class (§5).
// The synthetic writer and the strict loader (A3) both use it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor_view.h"

namespace dsv4 {

// Byte classes of §5.1 / §5.3.
enum class ByteClass { fp8_attn, fp8_shared, experts_packed, expert_scales, indexer, compressor,
                       router, hc, norms_sink, embed, head, drafter_extra };
const char* byte_class_name(ByteClass c);

struct CensusEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  ByteClass cls;
  int layer_id = -1;   // -1 for globals
  uint64_t bytes() const;
};

struct CensusOptions {
  ExpertRecipe trunk_experts = ExpertRecipe::nvfp4;
  ExpertRecipe drafter_experts = ExpertRecipe::mxfp4;
  bool nvfp4_input_scale = true;   // NVFP4 files carry input_scale (ignored on load, C3)
  int drafter_blocks = -1;         // -1: len(dspark_target_layer_ids) when DSpark, else 0
};

std::vector<CensusEntry> tensor_census(const ModelConfig& c, const CensusOptions& o);
// The parts tensor_census concatenates: the globals (embed, head, norm, hc_head_*), and
// one block (trunk l < L, or drafter block L + k with its mtp.0 / mtp.last extras), whose
// routed experts use o.trunk_experts (l < L) or o.drafter_experts (l >= L).
std::vector<CensusEntry> global_census(const ModelConfig& c);
std::vector<CensusEntry> block_census(const ModelConfig& c, const CensusOptions& o, int layer_id);
// o.drafter_blocks resolved: -1 -> len(dspark_target_layer_ids) when DSpark, else 0.
int census_drafter_blocks(const ModelConfig& c, const CensusOptions& o);
// Resident bytes of one trunk layer / globals / the drafter, for placement (§5.7).
uint64_t layer_bytes(const std::vector<CensusEntry>& census, int layer_id);

}  // namespace dsv4
