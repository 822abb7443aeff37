// A checkpoint directory (CHECKPOINT.md §1): config.json, model.safetensors.index.json
// (or a single model.safetensors), shards mapped on first use. The loaders build the
// typed weight tables of weights.h and apply the load-time refusals of §4; every
// refusal throws Error naming the file, tensor and check. A rank that loads only its
// layers touches only the shards holding them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/weight_memory.h"
#include "model/weights.h"

namespace dsv4 {

enum class DrafterKind { none, dspark, nextn };

class Checkpoint {
 public:
  // Reads config.json and the index (headers of shards are read when first used).
  explicit Checkpoint(const std::string& dir);
  // Synthetic weights (issue 11): exactly the tensors dsv4-mkckpt writes for this config
  // and options, generated on first use into the attached weight memory (host, or a
  // backend's device memory) instead of read from files. Every load check below applies.
  Checkpoint(const ModelConfig& config, const SyntheticOptions& o);
  void attach_weight_memory(std::unique_ptr<WeightMemory> memory);
  bool synthetic() const { return synthetic_; }
  const WeightMemory* weight_memory() const { return memory_.get(); }

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  DrafterKind drafter_kind() const;              // from the names in the index (§1.3)
  int drafter_blocks() const;                    // distinct mtp.{k} prefixes (C9)

  bool has(const std::string& name) const;
  TensorView tensor(const std::string& name);    // maps the shard; throws if missing
  std::vector<std::string> names() const;        // every tensor name in the index
  std::string shard_of(const std::string& name) const;

  // Typed loaders with full dtype/shape checks (R1..R21, A3..A6).
  BlockWeights load_block(int layer_id);         // trunk l < L: "layers.l"; else "mtp.(l-L)"
  TensorView load_embed();                       // embed.weight BF16 [V, H]
  TensorView load_head_matrix();                 // head.weight BF16 [V, H]
  HeadWeights load_head();                       // norm + hc_head_*
  DrafterWeights load_drafter();                 // every mtp.* block + extras (DSpark)

  // Bytes of the tensors handed out so far (resident bytes of this rank).
  uint64_t bytes_loaded() const { return bytes_loaded_; }
  std::vector<std::string> shards_opened() const;

  // All of a resident view's bytes on the host (small tables: tid2eid, scale_2).
  std::vector<uint8_t> host_copy(const TensorView& v) const;

 private:
  void check_names();
  DType stored_dtype(const std::string& name);
  TensorView generated(const std::string& name);
  int shared_layer(int l) const;
  SafetensorsFile& shard(const std::string& file);
  std::string dir_;
  ModelConfig config_;
  std::map<std::string, std::string> weight_map_;  // tensor -> shard file
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;
  uint64_t bytes_loaded_ = 0;
  std::optional<uint64_t> index_total_size_;  // metadata.total_size (checked once all shards are open)
  DrafterKind drafter_kind_ = DrafterKind::none;
  int drafter_blocks_ = 0;
  // Synthetic source: recipes by name, generated views (each made once), their memory.
  bool synthetic_ = false, share_layers_ = false;
  std::map<std::string, SynthTensor> recipes_;
  std::map<std::string, TensorView> generated_;
  std::unique_ptr<WeightMemory> memory_;
};

}  // namespace dsv4
