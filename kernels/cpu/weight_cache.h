// Dequantized f32 copies of weights for the CPU reference, made on first use and
// owned by one CpuOps instance (keyed by the stored bytes' storage and address: a freed
// block's address comes back for other bytes). Values are the
// exact decoded checkpoint values (CHECKPOINT.md §3), so caching changes no result.
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "model/tensor_view.h"

namespace dsv4 {

class CpuWeightCache {
 public:
  // W [out, in] of an FP8 block-scaled linear (§3.4).
  const float* dense(const Fp8Linear& w);
  // W [rows, cols] of an FP4 expert projection (§3.6 / §3.7).
  const float* expert(const Fp4Linear& w);
  // Decodes those of ws not cached yet, one projection a thread (kernels/cpu/parallel_rows.h),
  // so later expert() calls only look them up.
  void decode_experts(const std::vector<const Fp4Linear*>& ws);
  // A BF16 or F32 tensor widened to f32 (islands, norms, head rows).
  const float* widened(const TensorView& t);
  void clear() { cache_.clear(); }

 private:
  using Key = std::pair<uint64_t, const void*>;  // (TensorView::storage, data)
  static Key key(const TensorView& t) { return {t.storage, t.data}; }
  std::map<Key, std::vector<float>> cache_;
};

}  // namespace dsv4
