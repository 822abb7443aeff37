// Dequantized f32 copies of weights for the CPU reference, made on first use and
// owned by one CpuOps instance (keyed by the stored bytes' address). Values are the
// exact decoded checkpoint values (CHECKPOINT.md §3), so caching changes no result.
#pragma once
#include <unordered_map>
#include <vector>

#include "model/tensor_view.h"

namespace dsv4 {

class CpuWeightCache {
 public:
  // W [out, in] of an FP8 block-scaled linear (§3.4).
  const float* dense(const Fp8Linear& w);
  // W [rows, cols] of an FP4 expert projection (§3.6 / §3.7).
  const float* expert(const Fp4Linear& w);
  // A BF16 or F32 tensor widened to f32 (islands, norms, head rows).
  const float* widened(const TensorView& t);
  void clear() { cache_.clear(); }

 private:
  std::unordered_map<const void*, std::vector<float>> cache_;
};

}  // namespace dsv4
