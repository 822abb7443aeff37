// A read-only view of one stored tensor (bytes inside a memory-mapped safetensors
// shard, or inside a buffer owned elsewhere), plus the typed groupings the model
// uses (FP8 block-scaled linears, FP4 expert projections). CHECKPOINT.md §1.4, §2, §3.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/expert_recipe.h"

namespace dsv4 {

// safetensors dtypes this engine accepts (CHECKPOINT.md §1.4; I32 only for tid2eid).
enum class DType { BF16, F32, F8_E4M3, F8_E8M0, I8, U8, I64, I32 };

const char* dtype_name(DType d);          // "BF16", ...
uint64_t next_storage_id();               // a fresh TensorView::storage / RopeTable::id
size_t dtype_size(DType d);               // element bytes
bool dtype_from_name(const std::string& s, DType* out);  // false for unknown / refused

struct TensorView {
  std::string name;             // checkpoint tensor name, e.g. "layers.3.attn.wq_a.weight"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;   // row-major; [] = scalar
  const uint8_t* data = nullptr;  // not necessarily aligned: read with memcpy
  size_t nbytes = 0;
  // Identity of the memory block holding `data` (a mapped file, a generated tensor), never
  // reused within a process: backends key their resident copies by (storage, data), since
  // a freed block's address comes back for other bytes. 0: an unnamed block.
  uint64_t storage = 0;
  bool on_device = false;       // `data` is device memory (weights generated in place)

  int64_t numel() const;
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i)); }
  bool empty() const { return data == nullptr; }
  // Element i widened to f32: BF16 and F32 only (the "islands", CHECKPOINT.md C12).
  float f32_at(int64_t i) const;
};

// FP8 128x128 block-scaled linear W[out, in] = e4m3(weight) * 2^(scale - 127)
// (CHECKPOINT.md §3.4). weight F8_E4M3 [out, in]; scale F8_E8M0 [ceil(out/128), ceil(in/128)].
struct Fp8Linear {
  TensorView weight;
  TensorView scale;
  int64_t out() const { return weight.dim(0); }
  int64_t in() const { return weight.dim(1); }
};

// One FP4 expert projection, logical [rows, cols] (y = W x, cols = input width).
// mxfp4: weight I8 [rows, cols/2], scale F8_E8M0 [rows, cols/32], scale_2 unused (1).
// nvfp4: weight U8 [rows, cols/2], scale F8_E4M3 [rows, cols/16], scale_2 = weight_scale_2.
struct Fp4Linear {
  ExpertRecipe recipe = ExpertRecipe::mxfp4;
  TensorView weight;
  TensorView scale;
  float scale_2 = 1.0f;
  int64_t rows = 0, cols = 0;
  int group() const { return expert_format(recipe).group; }
};

}  // namespace dsv4
