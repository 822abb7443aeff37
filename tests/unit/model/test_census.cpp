// Tensor census (CHECKPOINT.md §2, §5.1, §5.2, §1.3, §6.1) and the presets: every number
// below is quoted from the spec, never produced by the code under test.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "model/census.h"
#include "model/config.h"
#include "base/error.h"
#include "model/presets.h"

using namespace dsv4;

namespace {

struct Totals {
  size_t tensors = 0;
  uint64_t bytes = 0;
  uint64_t trunk = 0, globals = 0, drafter = 0;
};

Totals totals(const ModelConfig& c, const CensusOptions& o) {
  Totals t;
  const auto census = tensor_census(c, o);
  t.tensors = census.size();
  for (const auto& e : census) {
    t.bytes += e.bytes();
    (e.layer_id < 0 ? t.globals : e.layer_id < c.num_hidden_layers ? t.trunk : t.drafter) +=
        e.bytes();
  }
  return t;
}

CensusOptions recipe(ExpertRecipe trunk) {
  CensusOptions o;
  o.trunk_experts = trunk;
  return o;
}

// §1.3: the NextN variants (June release, NVIDIA NVFP4): no dspark_* keys, one mtp block,
// compress_ratios of L + 1 entries.
ModelConfig flash_nextn() {
  ModelConfig c = flash_preset();
  c.dspark = DsparkConfig{};
  c.compress_ratios.resize(44);
  return c;
}

const CensusEntry& find(const std::vector<CensusEntry>& census, const std::string& name) {
  for (const auto& e : census)
    if (e.name == name) return e;
  FAIL("no census entry " << name);
  return census.front();
}

}  // namespace

TEST_CASE("tiny census: 1,979 tensors and 21,153,332 B, input_scale included (§6.1)") {
  const Totals t = totals(tiny_preset(), CensusOptions{});
  CHECK(t.tensors == 1979);
  CHECK(t.bytes == 21153332);
  // Without input_scale: 7 trunk layers x 16 experts x 3 projections fewer scalars of 4 B.
  CensusOptions no_input;
  no_input.nvfp4_input_scale = false;
  const Totals u = totals(tiny_preset(), no_input);
  CHECK(u.tensors == 1979 - 7 * 16 * 3);
  CHECK(u.bytes == 21153332 - 7 * 16 * 3 * 4);
}

TEST_CASE("tiny census example shapes (§6.1)") {
  const auto census = tensor_census(tiny_preset(), CensusOptions{});
  using S = std::vector<int64_t>;
  CHECK(find(census, "layers.0.attn.wq_b.weight").shape == S{1024, 256});
  CHECK(find(census, "layers.0.attn.wq_b.scale").shape == S{8, 2});
  CHECK(find(census, "layers.0.attn.wo_a.weight").shape == S{512, 256});
  CHECK(find(census, "layers.0.attn.wo_a.scale").shape == S{4, 2});
  CHECK(find(census, "layers.0.attn.wo_b.weight").shape == S{256, 512});
  CHECK(find(census, "layers.0.attn.wo_b.scale").shape == S{2, 4});
  CHECK(find(census, "mtp.0.main_proj.weight").shape == S{256, 768});
  CHECK(find(census, "mtp.0.main_proj.scale").shape == S{2, 6});
  const auto& w1 = find(census, "layers.3.ffn.experts.0.w1.weight");
  CHECK(w1.dtype == DType::U8);
  CHECK(w1.shape == S{128, 128});
  CHECK(find(census, "layers.3.ffn.experts.0.w1.weight_scale").shape == S{128, 16});
  CHECK(find(census, "layers.3.ffn.experts.0.w1.weight_scale_2").shape == S{});
  const auto& w2 = find(census, "mtp.1.ffn.experts.15.w2.weight");
  CHECK(w2.dtype == DType::I8);
  CHECK(w2.shape == S{256, 64});
  CHECK(find(census, "mtp.1.ffn.experts.15.w2.scale").shape == S{256, 4});
  const auto& tid = find(census, "layers.2.ffn.gate.tid2eid");
  CHECK(tid.dtype == DType::I64);
  CHECK(tid.shape == S{512, 6});
  CHECK(find(census, "layers.4.attn.compressor.wkv.weight").shape == S{256, 256});
  CHECK(find(census, "layers.4.attn.compressor.ape").shape == S{4, 256});
  CHECK(find(census, "layers.5.attn.compressor.wkv.weight").shape == S{128, 256});
  CHECK(find(census, "layers.5.attn.compressor.ape").shape == S{16, 128});
  CHECK(find(census, "layers.6.attn.indexer.wq_b.weight").shape == S{512, 256});
}

TEST_CASE("Flash census totals (§5.2, §1.3)") {
  const ModelConfig flash = flash_preset();
  SUBCASE("NVFP4 trunk + globals + DSpark") {
    const Totals t = totals(flash, recipe(ExpertRecipe::nvfp4));
    CHECK(t.bytes == 175535844088ull);
    CHECK(t.tensors == 138365);
    CHECK(t.trunk == 162554611912ull);
    CHECK(t.globals == 2118393876ull);
    CHECK(t.drafter == 10862838300ull);
  }
  SUBCASE("official 0731: MXFP4 + DSpark") {
    const Totals t = totals(flash, recipe(ExpertRecipe::mxfp4));
    CHECK(t.bytes == 166878536440ull);
    CHECK(t.tensors == 72317);
    CHECK(t.trunk == 153897304264ull);
  }
  SUBCASE("NVIDIA DSpark with NVFP4 drafter experts (§1.3, §7 Q1)") {
    CensusOptions o = recipe(ExpertRecipe::nvfp4);
    o.drafter_experts = ExpertRecipe::nvfp4;
    CHECK(totals(flash, o).bytes == 176139842296ull);
  }
  SUBCASE("NextN variants: June MXFP4 and NVIDIA NVFP4") {
    CensusOptions o = recipe(ExpertRecipe::mxfp4);
    o.drafter_blocks = 1;
    const Totals june = totals(flash_nextn(), o);
    CHECK(june.bytes == 159609485896ull);
    CHECK(june.tensors == 69187);
    CHECK(june.drafter == 3593787756ull);
    o.trunk_experts = ExpertRecipe::nvfp4;
    const Totals nv = totals(flash_nextn(), o);
    CHECK(nv.bytes == 168266793544ull);
    CHECK(nv.tensors == 135235);
  }
}

TEST_CASE("Flash per-block tensor counts (§2.9) and bytes (§5.1)") {
  const ModelConfig flash = flash_preset();
  struct Kind { int layer; size_t mx_count, nv_count; uint64_t mx_bytes, nv_bytes; };
  const Kind kinds[] = {
      {0, 1565, 3101, 3566148952ull, 3767481688ull},   // A
      {1, 1565, 3101, 3566148952ull, 3767481688ull},   // A
      {2, 1576, 3112, 3596055640ull, 3797388376ull},   // B
      {4, 1576, 3112, 3589851224ull, 3791183960ull},   // C
      {42, 1576, 3112, 3589851224ull, 3791183960ull},  // C
      {3, 1569, 3105, 3568596312ull, 3769929048ull},   // D
      {41, 1569, 3105, 3568596312ull, 3769929048ull},  // D
  };
  const auto mx = tensor_census(flash, recipe(ExpertRecipe::mxfp4));
  const auto nv = tensor_census(flash, recipe(ExpertRecipe::nvfp4));
  for (const Kind& k : kinds) {
    CAPTURE(k.layer);
    CHECK(block_census(flash, recipe(ExpertRecipe::mxfp4), k.layer).size() == k.mx_count);
    CHECK(block_census(flash, recipe(ExpertRecipe::nvfp4), k.layer).size() == k.nv_count);
    CHECK(layer_bytes(mx, k.layer) == k.mx_bytes);
    CHECK(layer_bytes(nv, k.layer) == k.nv_bytes);
  }
  // Drafter blocks (§2.7): 1,565 tensors + extras; official shards 46, 47, 48.
  CHECK(block_census(flash, CensusOptions{}, 44).size() == 1565);
  CHECK(block_census(flash, CensusOptions{}, 43).size() == 1565 + 3);
  CHECK(block_census(flash, CensusOptions{}, 45).size() == 1565 + 7);
  CHECK(layer_bytes(mx, 43) == 3610287448ull);
  CHECK(layer_bytes(mx, 44) == 3559944536ull);
  CHECK(layer_bytes(mx, 45) == 3692606316ull);
}

TEST_CASE("Flash byte classes (§5.1 block A, §5.2 trunk)") {
  const ModelConfig flash = flash_preset();
  const auto census = tensor_census(flash, recipe(ExpertRecipe::nvfp4));
  std::map<ByteClass, uint64_t> block_a, block_b, trunk;
  for (const auto& e : census) {
    if (e.layer_id == 0) block_a[e.cls] += e.bytes();
    if (e.layer_id == 2) block_b[e.cls] += e.bytes();
    if (e.layer_id >= 0 && e.layer_id < 43) trunk[e.cls] += e.bytes();
  }
  CHECK(block_a[ByteClass::fp8_attn] == 106961280);
  CHECK(block_a[ByteClass::fp8_shared] == 25167360);
  CHECK(block_a[ByteClass::experts_packed] == 3221225472ull);
  CHECK(block_a[ByteClass::expert_scales] == 402659328);
  CHECK(block_a[ByteClass::router] == 8302592);
  CHECK(block_a[ByteClass::hc] == 3145944);
  CHECK(block_a[ByteClass::norms_sink] == 19712);
  CHECK(block_b[ByteClass::indexer] == 13112064);
  CHECK(block_b[ByteClass::compressor] == 16794624);
  CHECK(trunk[ByteClass::fp8_attn] == 4599335040ull);
  CHECK(trunk[ByteClass::fp8_shared] == 1082196480ull);
  CHECK(trunk[ByteClass::experts_packed] == 138512695296ull);
  CHECK(trunk[ByteClass::expert_scales] == 17314351104ull);
  CHECK(trunk[ByteClass::indexer] == 275353344);
  CHECK(trunk[ByteClass::compressor] == 525722624);
  CHECK(trunk[ByteClass::router] == 108834816);
  CHECK(trunk[ByteClass::hc] == 135275592);
  CHECK(trunk[ByteClass::norms_sink] == 847616);
  uint64_t embed = 0, head = 0;
  for (const auto& e : census) {
    if (e.cls == ByteClass::embed) embed += e.bytes();
    if (e.cls == ByteClass::head) head += e.bytes();
  }
  CHECK(embed == 1059061760ull);
  CHECK(head == 1059332116ull);
}

TEST_CASE("census refuses a layer id outside trunk + drafter") {
  CHECK_THROWS_AS(block_census(tiny_preset(), CensusOptions{}, 10), Error);
  CHECK_THROWS_AS(block_census(tiny_preset(), CensusOptions{}, -1), Error);
}

TEST_CASE("presets: config.json round trip through parse_model_config (§1.2, §6.1)") {
  for (const ModelConfig& p : {tiny_preset(), flash_preset()}) {
    const ModelConfig r = parse_model_config(model_config_json(p), "round-trip");
    CAPTURE(p.source);
    CHECK(r.vocab_size == p.vocab_size);
    CHECK(r.hidden_size == p.hidden_size);
    CHECK(r.num_hidden_layers == p.num_hidden_layers);
    CHECK(r.num_attention_heads == p.num_attention_heads);
    CHECK(r.head_dim == p.head_dim);
    CHECK(r.qk_rope_head_dim == p.qk_rope_head_dim);
    CHECK(r.q_lora_rank == p.q_lora_rank);
    CHECK(r.o_lora_rank == p.o_lora_rank);
    CHECK(r.o_groups == p.o_groups);
    CHECK(r.sliding_window == p.sliding_window);
    CHECK(r.compress_ratios == p.compress_ratios);
    CHECK(r.compress_rope_theta == p.compress_rope_theta);
    CHECK(r.rope_theta == p.rope_theta);
    CHECK(r.rope_scaling.factor == p.rope_scaling.factor);
    CHECK(r.rope_scaling.original_max_position_embeddings ==
          p.rope_scaling.original_max_position_embeddings);
    CHECK(r.rope_scaling.beta_fast == p.rope_scaling.beta_fast);
    CHECK(r.rope_scaling.beta_slow == p.rope_scaling.beta_slow);
    CHECK(r.max_position_embeddings == p.max_position_embeddings);
    CHECK(r.index_n_heads == p.index_n_heads);
    CHECK(r.index_head_dim == p.index_head_dim);
    CHECK(r.index_topk == p.index_topk);
    CHECK(r.n_routed_experts == p.n_routed_experts);
    CHECK(r.num_experts_per_tok == p.num_experts_per_tok);
    CHECK(r.moe_intermediate_size == p.moe_intermediate_size);
    CHECK(r.n_shared_experts == p.n_shared_experts);
    CHECK(r.num_hash_layers == p.num_hash_layers);
    CHECK(r.routed_scaling_factor == p.routed_scaling_factor);
    CHECK(r.swiglu_limit == p.swiglu_limit);
    CHECK(r.hc_mult == p.hc_mult);
    CHECK(r.hc_sinkhorn_iters == p.hc_sinkhorn_iters);
    CHECK(r.hc_eps == p.hc_eps);
    CHECK(r.rms_norm_eps == p.rms_norm_eps);
    CHECK(r.num_nextn_predict_layers == p.num_nextn_predict_layers);
    CHECK(r.bos_token_id == p.bos_token_id);
    CHECK(r.eos_token_id == p.eos_token_id);
    CHECK(r.dspark.present == p.dspark.present);
    CHECK(r.dspark.block_size == p.dspark.block_size);
    CHECK(r.dspark.noise_token_id == p.dspark.noise_token_id);
    CHECK(r.dspark.target_layer_ids == p.dspark.target_layer_ids);
    CHECK(r.dspark.markov_rank == p.dspark.markov_rank);
  }
}

TEST_CASE("preset values (§6.1 tiny, §1.2 Flash)") {
  const ModelConfig t = tiny_preset();
  CHECK(t.compress_ratios == std::vector<int>{0, 0, 4, 16, 4, 16, 4, 0, 0, 0});
  CHECK(t.dspark.target_layer_ids == std::vector<int>{4, 5, 6});
  CHECK(t.dspark.noise_token_id == 500);
  CHECK(t.dspark.markov_rank == 32);
  const ModelConfig f = flash_preset();
  REQUIRE(f.compress_ratios.size() == 46);
  CHECK(f.ratio(0) == 0);
  CHECK(f.ratio(1) == 0);
  CHECK(f.ratio(2) == 4);
  CHECK(f.ratio(3) == 128);
  CHECK(f.ratio(41) == 128);
  CHECK(f.ratio(42) == 4);
  CHECK(f.ratio(43) == 0);
  CHECK(f.ratio(45) == 0);
  CHECK(f.dspark.target_layer_ids == std::vector<int>{40, 41, 42});
  CHECK(f.dspark.noise_token_id == 128799);
  CHECK(f.vocab_size == 129280);
  CHECK(f.max_position_embeddings == 1048576);
}
