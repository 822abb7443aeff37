// config.json parsing and validation (CHECKPOINT.md §1.2, §6.1, §6.2, A6, A7; C2).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "error_text.h"
#include "model/config.h"

using namespace dsv4;
using dsv4::test::error_text;
using dsv4::test::mentions;

namespace {

// CHECKPOINT.md §6.1 verbatim.
constexpr const char* kTinyConfig = R"json({
  "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
  "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 7,
  "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 128,
  "qk_rope_head_dim": 64, "q_lora_rank": 256, "o_lora_rank": 128, "o_groups": 4,
  "sliding_window": 16, "compress_ratios": [0, 0, 4, 16, 4, 16, 4, 0, 0, 0],
  "compress_rope_theta": 160000, "rope_theta": 10000,
  "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 64,
                   "beta_fast": 32, "beta_slow": 1},
  "max_position_embeddings": 256,
  "index_n_heads": 4, "index_head_dim": 128, "index_topk": 8,
  "n_routed_experts": 16, "num_experts_per_tok": 6, "moe_intermediate_size": 128,
  "n_shared_experts": 1, "num_hash_layers": 3, "scoring_func": "sqrtsoftplus",
  "topk_method": "noaux_tc", "norm_topk_prob": true, "routed_scaling_factor": 1.5,
  "swiglu_limit": 10.0, "hidden_act": "silu",
  "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
  "num_nextn_predict_layers": 1,
  "dspark_block_size": 5, "dspark_noise_token_id": 500,
  "dspark_target_layer_ids": [4, 5, 6], "dspark_markov_rank": 32,
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                          "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
  "expert_dtype": "fp4", "tie_word_embeddings": false,
  "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16"
})json";

// The tiny config with one edit applied, parsed; returns the refusal message.
template <class Edit>
std::string refusal(Edit edit) {
  nlohmann::json j = nlohmann::json::parse(kTinyConfig);
  edit(j);
  return error_text([&] { parse_model_config(j.dump(), "config.json"); });
}

}  // namespace

TEST_CASE("tiny config of §6.1 parses to its values") {
  const ModelConfig c = parse_model_config(kTinyConfig, "config.json");
  CHECK(c.source == "config.json");
  CHECK(c.vocab_size == 512);
  CHECK(c.hidden_size == 256);
  CHECK(c.num_hidden_layers == 7);
  CHECK(c.num_attention_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.qk_rope_head_dim == 64);
  CHECK(c.q_lora_rank == 256);
  CHECK(c.o_lora_rank == 128);
  CHECK(c.o_groups == 4);
  CHECK(c.sliding_window == 16);
  CHECK(c.compress_ratios == std::vector<int>{0, 0, 4, 16, 4, 16, 4, 0, 0, 0});
  CHECK(c.compress_rope_theta == 160000.0);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rope_scaling.factor == 4.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 64);
  CHECK(c.rope_scaling.beta_fast == 32.0);
  CHECK(c.rope_scaling.beta_slow == 1.0);
  CHECK(c.max_position_embeddings == 256);
  CHECK(c.index_n_heads == 4);
  CHECK(c.index_head_dim == 128);
  CHECK(c.index_topk == 8);
  CHECK(c.n_routed_experts == 16);
  CHECK(c.num_experts_per_tok == 6);
  CHECK(c.moe_intermediate_size == 128);
  CHECK(c.n_shared_experts == 1);
  CHECK(c.num_hash_layers == 3);
  CHECK(c.routed_scaling_factor == 1.5);
  CHECK(c.swiglu_limit == 10.0);
  CHECK(c.hc_mult == 4);
  CHECK(c.hc_sinkhorn_iters == 20);
  CHECK(c.hc_eps == 1e-6);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK(c.num_nextn_predict_layers == 1);
  CHECK(c.bos_token_id == 0);
  CHECK(c.eos_token_id == 1);
  CHECK(c.dspark.present);
  CHECK(c.dspark.block_size == 5);
  CHECK(c.dspark.noise_token_id == 500);
  CHECK(c.dspark.target_layer_ids == std::vector<int>{4, 5, 6});
  CHECK(c.dspark.markov_rank == 32);
  // Derived kinds of §6.1: 0, 1 hash r 0; 2 hash r 4; 3, 5 coarse 16; drafter 7..9 r 0.
  CHECK(c.is_hash(2));
  CHECK_FALSE(c.is_hash(3));
  CHECK(c.has_indexer(2));
  CHECK_FALSE(c.has_compressor(1));
  CHECK(c.ratio(3) == 16);
  CHECK_FALSE(c.has_indexer(3));
  CHECK(c.ratio(8) == 0);
  CHECK(c.hc_mix() == 24);  // (2 + 4) * 4
}

TEST_CASE("unknown keys are ignored; dspark_* keys are optional as a group (C2)") {
  nlohmann::json j = nlohmann::json::parse(kTinyConfig);
  j["reap_pruning"] = {{"kept", 160}};
  j["n_mtp_layers"] = 3;
  for (const char* k : {"dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                        "dspark_markov_rank"})
    j.erase(k);
  j["compress_ratios"] = {0, 0, 4, 16, 4, 16, 4, 0};  // tiny-nextn: L + 1 entries
  const ModelConfig c = parse_model_config(j.dump(), "config.json");
  CHECK_FALSE(c.dspark.present);
  CHECK(c.compress_ratios.size() == 8);
}

TEST_CASE("load_model_config reads a file and names it in refusals") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dsv4_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "config.json").string();
  std::ofstream(path) << kTinyConfig;
  CHECK(load_model_config(path).source == path);
  std::ofstream(path) << R"({"model_type": "deepseek_v3"})";
  CHECK(mentions(error_text([&] { load_model_config(path); }), path, "model_type"));
  std::filesystem::remove_all(dir);
  CHECK(mentions(error_text([&] { load_model_config(path); }), path));
}

TEST_CASE("a missing required key is refused by name (C2)") {
  for (const char* key :
       {"head_dim", "vocab_size", "compress_ratios", "swiglu_limit", "model_type"}) {
    INFO(key);
    CHECK(refusal([&](nlohmann::json& j) { j.erase(key); }) ==
          std::string("config.json: missing required field ") + key);
  }
  CHECK(refusal([](nlohmann::json& j) { j["rope_scaling"].erase("factor"); }) ==
        "config.json: missing required field rope_scaling.factor");
  // DSpark keys come as a group.
  CHECK(refusal([](nlohmann::json& j) { j.erase("dspark_markov_rank"); }) ==
        "config.json: missing required field dspark_markov_rank");
}

TEST_CASE("bad dimensions are refused naming the field and value (§6.2, A6)") {
  CHECK(refusal([](nlohmann::json& j) { j["hidden_size"] = 200; }) ==
        "config.json: field hidden_size = 200 must be a multiple of 128");
  CHECK(mentions(refusal([](nlohmann::json& j) { j["o_groups"] = 3; }), "config.json",
                 "o_groups = 3"));
  CHECK(mentions(refusal([](nlohmann::json& j) {
                   j["head_dim"] = 192;
                   j["o_groups"] = 8;
                 }),
                 "o_groups = 8", "not a multiple of 128"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["qk_rope_head_dim"] = 32; }),
                 "qk_rope_head_dim = 32"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["index_head_dim"] = 96; }),
                 "index_head_dim = 96"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["num_experts_per_tok"] = 17; }),
                 "num_experts_per_tok = 17"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["num_hash_layers"] = 8; }),
                 "num_hash_layers = 8"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["moe_intermediate_size"] = 100; }),
                 "moe_intermediate_size = 100"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["o_lora_rank"] = 64; }), "o_lora_rank = 64"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["index_topk"] = 0; }), "index_topk = 0"));
  CHECK(mentions(refusal([](nlohmann::json& j) {
                   j["rope_scaling"]["original_max_position_embeddings"] = 256;
                 }),
                 "rope_scaling.original_max_position_embeddings = 256"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["compress_ratios"][3] = 2; }),
                 "compress_ratios[3] = 2"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["compress_ratios"][8] = 4; }),
                 "compress_ratios[8] = 4", "drafter"));
  CHECK(mentions(
      refusal([](nlohmann::json& j) { j["compress_ratios"] = {0, 0, 4, 16, 4, 16, 4, 0, 0}; }),
      "compress_ratios", "10 entries"));
  CHECK(mentions(refusal([](nlohmann::json& j) {
                   j["dspark_target_layer_ids"] = {4, 4, 6};
                 }),
                 "dspark_target_layer_ids = 4", "twice"));
  CHECK(mentions(refusal([](nlohmann::json& j) {
                   j["dspark_target_layer_ids"] = {4, 5, 7};
                 }),
                 "dspark_target_layer_ids = 7"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["dspark_noise_token_id"] = 512; }),
                 "dspark_noise_token_id = 512"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["dspark_block_size"] = 16; }),
                 "dspark_block_size = 16"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["hidden_size"] = 256.5; }), "hidden_size",
                 "integer"));
}

TEST_CASE("identity and quantization_config are checked (§1.2, A7)") {
  CHECK(mentions(refusal([](nlohmann::json& j) {
                   j["quantization_config"]["weight_block_size"] = {64, 64};
                 }),
                 "config.json", "quantization_config.weight_block_size"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["quantization_config"]["scale_fmt"] = "fp32"; }),
                 "quantization_config.scale_fmt", "fp32"));
  CHECK(refusal([](nlohmann::json& j) { j["quantization_config"].erase("scale_fmt"); }) ==
        "config.json: missing required field quantization_config.scale_fmt");
  CHECK(mentions(refusal([](nlohmann::json& j) { j["architectures"] = {"DeepseekV3ForCausalLM"}; }),
                 "architectures"));
  CHECK(
      mentions(refusal([](nlohmann::json& j) { j["scoring_func"] = "softmax"; }), "scoring_func"));
  CHECK(mentions(refusal([](nlohmann::json& j) { j["rope_scaling"]["type"] = "linear"; }),
                 "rope_scaling.type"));
  // Without quantization_config the config still loads (C3: it is not otherwise read).
  nlohmann::json j = nlohmann::json::parse(kTinyConfig);
  j.erase("quantization_config");
  CHECK_NOTHROW(parse_model_config(j.dump(), "config.json"));
}
