// How each tensor of a synthetic checkpoint is made (CHECKPOINT.md §3.8): its master
// stream and range, and which writer encoder turns the masters into the stored bytes.
// One recipe per stored tensor, so a tensor's bytes can be produced on their own, on the
// host (model/synthetic_host.cpp) or directly in device memory (kernels/cuda), and equal
// what dsv4-mkckpt writes for the same config, recipe options and seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/census.h"
#include "model/config.h"

namespace dsv4 {

enum class SynthKind {
  island,      // BF16 / F32: the rounded masters (rules 1, 3)
  fp8_codes,   // E4M3 codes of an FP8 block-scaled weight (rule 4)
  fp8_scales,  // its E8M0 block scales
  mx_packed,   // MXFP4 packed nibbles (rule 6)
  mx_scales,   // its E8M0 group scales
  nv_packed,   // NVFP4 packed nibbles (rule 7)
  nv_scales,   // its E4M3 block scales
  nv_scale_2,  // its F32 scalar weight_scale_2
  one,         // F32 scalar 1.0 (NVFP4 input_scale, written as 1, ignored on load: C3)
  tid2eid,     // I64 [V, K]: per row the first K of a Fisher-Yates shuffle of 0..E-1
};

struct SynthTensor {
  std::string name;           // the stored tensor
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  SynthKind kind = SynthKind::island;
  uint64_t state = 0;         // FNV-1a-64(master tensor's name) ^ seed (a scale: its weight's)
  double lo = 0, hi = 0;      // master range
  int64_t rows = 0, cols = 0; // the master matrix (logical FP4 columns); island: [1, numel]
  int64_t experts = 0;        // tid2eid: E
  uint64_t bytes() const;
};

uint64_t fnv1a64(const std::string& s);

// The recipe of every census entry (same order), for masters drawn with `seed`.
std::vector<SynthTensor> synth_plan(const std::vector<CensusEntry>& census, int64_t n_experts,
                                    uint64_t seed);

}  // namespace dsv4
