// Built-in model configs: the tiny test model (CHECKPOINT.md §6.1) and DeepSeek-V4-Flash
// with the DSpark drafter (§1.2), plus the config.json text a checkpoint writer emits.
#pragma once
#include <string>

#include "model/config.h"
#include "model/tensor_view.h"

namespace dsv4 {

ModelConfig tiny_preset();   // §6.1 exactly
ModelConfig flash_preset();  // §1.2 (0731 values, 46-entry compress_ratios, DSpark)
// Flash cut to trunk layers [0, trunk_layers) with their real dimensions and kinds, the
// globals, and no drafter (no dspark_* keys, no mtp.*): a checkpoint that fits one card
// for decode benchmarks (§5.3). Throws Error unless 1 <= trunk_layers <= 43.
ModelConfig flash_trunk_preset(int trunk_layers);
// The same with Flash's dspark_* keys, the tap targets moved to the last min(3, N) trunk
// layers and their drafter entries in compress_ratios, for a checkpoint written WITHOUT
// the mtp.* tensors (SyntheticOptions::drafter_blocks = 0): speculative runs with the
// replay drafter (verify arenas, taps) work on it, `--drafter dspark` is refused.
ModelConfig flash_trunk_spec_preset(int trunk_layers);

// The command-line tools' `--preset NAME [--trunk-layers N]`: "tiny" or "flash";
// trunk_layers > 0 (flash only) selects flash_trunk_preset. Throws Error naming the flag.
ModelConfig preset_by_name(const std::string& name, int trunk_layers = 0);
// `--experts VALUE`: "nvfp4" or "mxfp4". Throws Error naming the flag.
ExpertRecipe expert_recipe_by_name(const std::string& value);

// config.json with the HF keys of §1.2 / §6.1 (identity, quantization_config,
// expert_dtype, ...), such that parse_model_config reads back the same ModelConfig.
std::string model_config_json(const ModelConfig& c);

}  // namespace dsv4
