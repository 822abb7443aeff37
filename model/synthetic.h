// Deterministic synthetic checkpoints (CHECKPOINT.md §3.8 "Synthetic values", §6.1):
// f32 masters from a per-tensor SplitMix64 stream, encoded with the §3.8 encoders,
// written as safetensors shards + model.safetensors.index.json + config.json. The same
// config, options and seed give byte-identical files. Shards are built and written one
// at a time, so at most one shard is held in memory (Flash: about 3.8 GB); the tensors of
// a shard are encoded in parallel, which never changes the bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "model/config.h"
#include "model/tensor_view.h"

namespace dsv4 {

enum class ShardLayout {
  per_layer,  // §1.1: embed | one shard per trunk layer | head, norm, hc_head_* | one per mtp.k
  compact,    // §6.1: embed + layers [0, ceil(L/2)) | the other layers + head | mtp.*
};

struct SyntheticOptions {
  uint64_t seed = 1;
  ExpertRecipe trunk_experts = ExpertRecipe::nvfp4;    // C1: NVFP4 default, mxfp4 = official
  ExpertRecipe drafter_experts = ExpertRecipe::mxfp4;  // §6.1
  ShardLayout layout = ShardLayout::compact;
  int threads = 0;                                     // encoder threads; 0 = all cores
  bool tokenizer = false;                              // also tokenizer*.json (tiny_tokenizer.h)
  int drafter_blocks = -1;  // mtp.* blocks written: -1 = the config's (CensusOptions)
  std::function<void(const std::string&)> progress;    // one line per shard written (optional)
  // Benchmark mode of generated weights (never written): trunk layers of one kind (compress
  // ratio, routing) share the first such layer's tensors, so the whole depth fits one GPU
  // while every step still streams each layer's bytes (a layer reads >= 220 MB per step,
  // past the 50 MB L2, so the sharing cannot be served from cache).
  bool share_layers_by_kind = false;
};

// Writes the checkpoint into dir (created if missing; existing files are overwritten).
// Throws Error on I/O failure.
void write_synthetic_checkpoint(const ModelConfig& c, const std::string& dir,
                                const SyntheticOptions& o);

}  // namespace dsv4
