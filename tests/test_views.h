// Small shared test helpers: TensorViews over in-memory bytes (the shapes a checkpoint
// would store, CHECKPOINT.md §2.5, §3) and seeded uniform data (never all zeros).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/codecs.h"
#include "model/tensor_view.h"

namespace dsv4::test {

// A view of `bytes` as a stored tensor (bytes must outlive the view).
inline TensorView byte_view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const std::vector<uint8_t>& bytes) {
  TensorView t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = bytes.data();
  t.nbytes = bytes.size();
  t.storage = next_storage_id();
  return t;
}

// An FP4 projection [rows, cols] over enc: MXFP4 = I8 + E8M0 per 32, NVFP4 = U8 + E4M3
// per 16 + scale_2, named as the checkpoint names them.
inline Fp4Linear fp4_view(const std::string& name, ExpertRecipe recipe, int64_t rows,
                          int64_t cols, const Fp4Encoded& enc) {
  const bool mx = recipe == ExpertRecipe::mxfp4;
  Fp4Linear w;
  w.recipe = recipe;
  w.rows = rows;
  w.cols = cols;
  w.scale_2 = enc.scale_2;
  w.weight = byte_view(name + ".weight", mx ? DType::I8 : DType::U8, {rows, cols / 2}, enc.packed);
  w.scale = byte_view(name + (mx ? ".scale" : ".weight_scale"), mx ? DType::F8_E8M0 : DType::F8_E4M3,
                      {rows, cols / w.group()}, enc.scales);
  return w;
}

// n values uniform in [lo, hi) from a seeded generator.
inline std::vector<float> random_uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace dsv4::test
