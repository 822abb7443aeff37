// Preset configs and the config.json writer (CHECKPOINT.md §1.2, §6.1).
#include "model/presets.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace dsv4 {

namespace {

// Fields the tiny model and Flash share (§1.2 / §6.1).
ModelConfig common_config() {
  ModelConfig c;
  c.compress_rope_theta = 160000;
  c.rope_theta = 10000;
  c.rope_scaling.beta_fast = 32;
  c.rope_scaling.beta_slow = 1;
  c.num_experts_per_tok = 6;
  c.n_shared_experts = 1;
  c.num_hash_layers = 3;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 10.0;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  c.num_nextn_predict_layers = 1;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.dspark.present = true;
  c.dspark.block_size = 5;
  return c;
}

}  // namespace

ModelConfig tiny_preset() {
  ModelConfig c = common_config();
  c.source = "preset tiny";
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.num_hidden_layers = 7;
  c.num_attention_heads = 8;
  c.head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 256;
  c.o_lora_rank = 128;
  c.o_groups = 4;
  c.sliding_window = 16;
  c.compress_ratios = {0, 0, 4, 16, 4, 16, 4, 0, 0, 0};
  c.rope_scaling.factor = 4;
  c.rope_scaling.original_max_position_embeddings = 64;
  c.max_position_embeddings = 256;
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 8;
  c.n_routed_experts = 16;
  c.moe_intermediate_size = 128;
  c.dspark.noise_token_id = 500;
  c.dspark.target_layer_ids = {4, 5, 6};
  c.dspark.markov_rank = 32;
  return c;
}

ModelConfig flash_preset() {
  ModelConfig c = common_config();
  c.source = "preset flash";
  c.vocab_size = 129280;
  c.hidden_size = 4096;
  c.num_hidden_layers = 43;
  c.num_attention_heads = 64;
  c.head_dim = 512;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 1024;
  c.o_lora_rank = 1024;
  c.o_groups = 8;
  c.sliding_window = 128;
  // [0, 0, (4, 128) x 20, 4, 0, 0, 0]: trunk layers 0..42, then the 3 drafter blocks.
  c.compress_ratios = {0, 0};
  for (int i = 0; i < 20; ++i) {
    c.compress_ratios.push_back(4);
    c.compress_ratios.push_back(128);
  }
  c.compress_ratios.insert(c.compress_ratios.end(), {4, 0, 0, 0});
  c.rope_scaling.factor = 16;
  c.rope_scaling.original_max_position_embeddings = 65536;
  c.max_position_embeddings = 1048576;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.n_routed_experts = 256;
  c.moe_intermediate_size = 2048;
  c.dspark.noise_token_id = 128799;
  c.dspark.target_layer_ids = {40, 41, 42};
  c.dspark.markov_rank = 256;
  return c;
}

ModelConfig flash_trunk_preset(int trunk_layers) {
  ModelConfig c = flash_preset();
  const int L = c.num_hidden_layers;
  if (trunk_layers < 1 || trunk_layers > L)
    throw Error(cat("flash trunk layers = ", trunk_layers, ": must lie in [1, ", L, "]"));
  c.source = cat("preset flash, trunk layers 0..", trunk_layers - 1);
  c.num_hidden_layers = trunk_layers;
  c.num_hash_layers = std::min(c.num_hash_layers, trunk_layers);  // layers 0-2 stay hash
  c.compress_ratios.resize(static_cast<size_t>(trunk_layers));    // no drafter entries
  c.num_nextn_predict_layers = 0;
  c.dspark = DsparkConfig{};
  return c;
}

ModelConfig flash_trunk_spec_preset(int trunk_layers) {
  ModelConfig c = flash_trunk_preset(trunk_layers);
  c.dspark = flash_preset().dspark;
  const int n_t = std::min(3, trunk_layers);
  c.dspark.target_layer_ids.clear();
  for (int l = trunk_layers - n_t; l < trunk_layers; ++l) c.dspark.target_layer_ids.push_back(l);
  c.compress_ratios.resize(static_cast<size_t>(trunk_layers + n_t), 0);  // window-only blocks
  c.source += ", dspark_* keys without mtp.* tensors";
  return c;
}

std::string model_config_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = "deepseek_v4";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_lora_rank"] = c.o_lora_rank;
  j["o_groups"] = c.o_groups;
  j["sliding_window"] = c.sliding_window;
  j["compress_ratios"] = c.compress_ratios;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", c.rope_scaling.factor},
                       {"original_max_position_embeddings",
                        c.rope_scaling.original_max_position_embeddings},
                       {"beta_fast", c.rope_scaling.beta_fast},
                       {"beta_slow", c.rope_scaling.beta_slow}};
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["n_routed_experts"] = c.n_routed_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_hash_layers"] = c.num_hash_layers;
  j["scoring_func"] = "sqrtsoftplus";
  j["topk_method"] = "noaux_tc";
  j["norm_topk_prob"] = true;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hidden_act"] = "silu";
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  if (c.dspark.present) {
    j["dspark_block_size"] = c.dspark.block_size;
    j["dspark_noise_token_id"] = c.dspark.noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark.target_layer_ids;
    j["dspark_markov_rank"] = c.dspark.markov_rank;
  }
  j["quantization_config"] = {{"quant_method", "fp8"},
                              {"fmt", "e4m3"},
                              {"scale_fmt", "ue8m0"},
                              {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 128}}};
  j["expert_dtype"] = "fp4";
  j["tie_word_embeddings"] = false;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["torch_dtype"] = "bfloat16";
  return j.dump(2) + "\n";
}

ModelConfig preset_by_name(const std::string& name, int trunk_layers) {
  if (trunk_layers != 0 && name != "flash")
    throw Error(cat("--trunk-layers applies to --preset flash only (got --preset ", name, ")"));
  if (name == "tiny") return tiny_preset();
  if (name == "flash") return trunk_layers != 0 ? flash_trunk_preset(trunk_layers) : flash_preset();
  throw Error(cat("--preset: '", name, "' is not one of tiny, flash"));
}

ExpertRecipe expert_recipe_by_name(const std::string& value) {
  if (value == "nvfp4") return ExpertRecipe::nvfp4;
  if (value == "mxfp4") return ExpertRecipe::mxfp4;
  throw Error(cat("--experts: '", value, "' is not one of nvfp4, mxfp4"));
}

}  // namespace dsv4
