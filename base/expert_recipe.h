// The two routed-expert storage recipes (CHECKPOINT.md §3.6, §3.7; MODEL.md D13) and
// the one rule that tells them apart from what a checkpoint stores (C1, R10): U8 packed
// weights + F8_E4M3 `.weight_scale` per 16 inputs + F32 `.weight_scale_2` are NVFP4, I8
// packed weights + F8_E8M0 `.scale` per 32 inputs are MXFP4, anything else is refused.
// Loading decides from the packed weight's stored dtype; placement, which opens no shard,
// from the block-scale sibling the index names. Both read the table below.
#pragma once
#include <optional>
#include <string_view>

namespace dsv4 {

enum class ExpertRecipe { mxfp4, nvfp4 };

struct ExpertFormat {
  const char* name;          // "MXFP4" / "NVFP4"
  const char* packed_dtype;  // safetensors dtype of `.weight` [rows, cols / 2]
  const char* scale_suffix;  // the block scales' tensor suffix
  int group;                 // inputs per block scale
  bool scale_2;              // carries the F32 scalar `.weight_scale_2`
};

inline const ExpertFormat& expert_format(ExpertRecipe r) {
  static constexpr ExpertFormat kMxfp4{"MXFP4", "I8", ".scale", 32, false};
  static constexpr ExpertFormat kNvfp4{"NVFP4", "U8", ".weight_scale", 16, true};
  return r == ExpertRecipe::nvfp4 ? kNvfp4 : kMxfp4;
}

// The recipe whose packed dtype is `dtype` (a safetensors dtype string); none otherwise.
inline std::optional<ExpertRecipe> expert_recipe_of_packed_dtype(std::string_view dtype) {
  for (ExpertRecipe r : {ExpertRecipe::mxfp4, ExpertRecipe::nvfp4})
    if (dtype == expert_format(r).packed_dtype) return r;
  return std::nullopt;
}

// The recipe whose block-scale sibling exists, `has(suffix)` telling whether the stem +
// suffix is stored; none when neither or both are.
template <class Has>
std::optional<ExpertRecipe> expert_recipe_of_scale_sibling(Has has) {
  const bool mx = has(expert_format(ExpertRecipe::mxfp4).scale_suffix);
  const bool nv = has(expert_format(ExpertRecipe::nvfp4).scale_suffix);
  if (mx == nv) return std::nullopt;
  return nv ? ExpertRecipe::nvfp4 : ExpertRecipe::mxfp4;
}

}  // namespace dsv4
