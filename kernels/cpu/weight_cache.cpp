// CpuWeightCache: decode once per stored tensor, keyed by the stored bytes' address.
#include "kernels/cpu/weight_cache.h"

#include <set>

#include "kernels/cpu/parallel_rows.h"
#include "model/codecs.h"
#include "base/error.h"

namespace dsv4 {

namespace {

void require_stored(const TensorView& t, const char* what) {
  if (t.empty()) throw Error(cat("cpu weight cache: tensor '", t.name, "' (", what, ") has no data"));
  if (t.on_device)
    throw Error(cat("backend cpu: tensor '", t.name, "' (", what, ") lives in device memory"));
}

}  // namespace

const float* CpuWeightCache::dense(const Fp8Linear& w) {
  require_stored(w.weight, "FP8 linear");
  auto it = cache_.find(key(w.weight));
  if (it == cache_.end()) it = cache_.emplace(key(w.weight), decode_fp8_linear(w)).first;
  return it->second.data();
}

const float* CpuWeightCache::expert(const Fp4Linear& w) {
  require_stored(w.weight, "FP4 expert projection");
  auto it = cache_.find(key(w.weight));
  if (it == cache_.end()) it = cache_.emplace(key(w.weight), decode_fp4_linear(w)).first;
  return it->second.data();
}

void CpuWeightCache::decode_experts(const std::vector<const Fp4Linear*>& ws) {
  std::vector<const Fp4Linear*> missing;  // distinct, in the order given
  std::set<Key> seen;
  for (const Fp4Linear* w : ws) {
    require_stored(w->weight, "FP4 expert projection");
    if (!cache_.count(key(w->weight)) && seen.insert(key(w->weight)).second) missing.push_back(w);
  }
  if (missing.empty()) return;
  std::vector<std::vector<float>> decoded(missing.size());
  parallel_rows(static_cast<int64_t>(missing.size()), missing[0]->rows * missing[0]->cols,
                [&](int64_t i0, int64_t i1) {
                  for (int64_t i = i0; i < i1; ++i) decoded[i] = decode_fp4_linear(*missing[i]);
                });
  for (size_t i = 0; i < missing.size(); ++i)
    cache_.emplace(key(missing[i]->weight), std::move(decoded[i]));
}

const float* CpuWeightCache::widened(const TensorView& t) {
  require_stored(t, "BF16/F32 weight");
  if (t.dtype != DType::BF16 && t.dtype != DType::F32)
    throw Error(cat("cpu weight cache: tensor '", t.name, "' has dtype ", dtype_name(t.dtype),
                    ", expected BF16 or F32"));
  auto it = cache_.find(key(t));
  if (it == cache_.end()) {
    const int64_t n = t.numel();
    std::vector<float> w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = t.f32_at(i);
    it = cache_.emplace(key(t), std::move(w)).first;
  }
  return it->second.data();
}

}  // namespace dsv4
