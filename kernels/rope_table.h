// RoPE frequency tables (MODEL.md §4.6 with decision D8), built on the host once per
// stage and shared by every backend (the CUDA backend uploads them).
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/tensor_view.h"

namespace dsv4 {

struct RopeTable {
  uint64_t id = next_storage_id();  // identity for backends' resident copies (never reused)
  int rope_dim = 0;            // rd (64): rd/2 (cos, sin) pairs per position
  int64_t positions = 0;       // rows
  std::vector<float> freq;     // [rd/2]
  std::vector<float> fc;       // [positions, rd]: fc[p*rd + 2i] = cos, fc[p*rd + 2i + 1] = sin
};

// plain (ratio-0 layers): base rope_theta, no YaRN; yarn (ratio > 0): compress_rope_theta
// with rope_scaling. `positions` rows (the drafter needs max_seq + B).
RopeTable make_rope_table(double base, int rope_dim, int64_t positions, const YarnConfig* yarn);
RopeTable make_plain_rope(const ModelConfig& c, int64_t positions);
RopeTable make_yarn_rope(const ModelConfig& c, int64_t positions);

}  // namespace dsv4
