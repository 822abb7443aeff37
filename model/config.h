// config.json of a DeepSeek-V4 checkpoint: every field the engine needs, drafter
// fields included, validated (CHECKPOINT.md §1.2, §6.2, A6, A7; decisions C2, C3, C9).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsv4 {

struct YarnConfig {
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
};

struct DsparkConfig {
  bool present = false;              // dspark_* keys exist
  int block_size = 0;                // B
  int64_t noise_token_id = 0;
  std::vector<int> target_layer_ids; // tap order = concatenation order
  int markov_rank = 0;               // R
};

struct ModelConfig {
  std::string source;                // path of the config.json (for messages)
  int64_t vocab_size = 0;            // V
  int hidden_size = 0;               // H
  int num_hidden_layers = 0;         // L (trunk)
  int num_attention_heads = 0;       // nh
  int head_dim = 0;                  // D
  int qk_rope_head_dim = 0;          // rd
  int q_lora_rank = 0;               // Qr
  int o_lora_rank = 0;               // Or
  int o_groups = 0;                  // G
  int sliding_window = 0;            // W
  std::vector<int> compress_ratios;  // per layer id (trunk then drafter blocks)
  double compress_rope_theta = 0, rope_theta = 0;
  YarnConfig rope_scaling;
  int64_t max_position_embeddings = 0;
  int index_n_heads = 0, index_head_dim = 0, index_topk = 0;  // Ih, Id, topk
  int n_routed_experts = 0;          // E
  int num_experts_per_tok = 0;       // K
  int moe_intermediate_size = 0;     // I
  int n_shared_experts = 0;          // S
  int num_hash_layers = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;         // <= 0 disables the clamp (MODEL.md D16)
  int hc_mult = 0;                   // hc
  int hc_sinkhorn_iters = 0;
  double hc_eps = 0, rms_norm_eps = 0;
  int num_nextn_predict_layers = 0;  // informational; never a block count (C9)
  int64_t bos_token_id = 0, eos_token_id = 1;
  DsparkConfig dspark;

  // Derived per layer id (trunk l < L; drafter block k has id L + k).
  int ratio(int layer_id) const { return compress_ratios.at(static_cast<size_t>(layer_id)); }
  bool is_hash(int layer_id) const { return layer_id < num_hash_layers; }
  bool has_compressor(int layer_id) const { return ratio(layer_id) > 0; }
  bool has_indexer(int layer_id) const { return ratio(layer_id) == 4; }
  bool overlap(int layer_id) const { return ratio(layer_id) == 4; }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }  // M
};

// Parses and validates config.json; throws Error naming the file and field.
// Unknown keys are ignored (C2); quantization_config is checked only for A7.
ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);

// The §6.2 / A6 invariants (called by the loaders; throws Error naming the field).
void validate_model_config(const ModelConfig& c);

}  // namespace dsv4
