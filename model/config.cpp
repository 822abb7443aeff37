// config.json reader and its invariants (CHECKPOINT.md §1.2, §6.2, A6, A7; C2, C3).
#include "model/config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {

namespace {

using nlohmann::json;

// Typed access to the fields of one JSON object; every refusal names the source file
// and the field (dotted for nested objects, e.g. rope_scaling.factor).
class Fields {
 public:
  Fields(const json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return obj_.contains(key); }

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error(cat(source_, ": field ", prefix_, key, " ", what));
  }

  const json& required(const char* key) const {
    if (!has(key)) throw Error(cat(source_, ": missing required field ", prefix_, key));
    return obj_.at(key);
  }

  int64_t integer(const char* key) const { return as_integer(key, required(key)); }
  int64_t integer_or(const char* key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  int small_int(const char* key) const { return narrow(key, integer(key)); }
  int small_int_or(const char* key, int fallback) const {
    return has(key) ? small_int(key) : fallback;
  }

  double number(const char* key) const {
    const json& v = required(key);
    if (!v.is_number()) fail(key, cat("must be a number, got ", v.dump()));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(key, cat("= ", v.dump(), " is not a finite number"));
    return x;
  }

  std::vector<int> int_list(const char* key) const {
    const json& v = required(key);
    if (!v.is_array()) fail(key, cat("must be an array of integers, got ", v.dump()));
    std::vector<int> out;
    for (const json& x : v) out.push_back(narrow(key, as_integer(key, x)));
    return out;
  }

  // A key that, when present, must hold exactly this value (identity and recipe keys
  // whose other values this engine does not implement).
  void expect_if_present(const char* key, const json& want) const {
    if (has(key) && obj_.at(key) != want)
      fail(key, cat("= ", obj_.at(key).dump(), " is not supported (expected ", want.dump(), ")"));
  }
  void expect(const char* key, const json& want) const {
    required(key);
    expect_if_present(key, want);
  }

  Fields object(const char* key) const {
    const json& v = required(key);
    if (!v.is_object()) fail(key, cat("must be an object, got ", v.dump()));
    return Fields(v, source_, cat(prefix_, key, "."));
  }

 private:
  int64_t as_integer(const char* key, const json& v) const {
    if (!v.is_number_integer()) fail(key, cat("must be an integer, got ", v.dump()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(key, cat("= ", v.dump(), " is out of range"));
    return v.get<int64_t>();
  }
  int narrow(const char* key, int64_t v) const {
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      fail(key, cat("= ", v, " is out of range"));
    return static_cast<int>(v);
  }

  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

// One §6.2 check: refuses "<file>: field <name> = <value> <rule>" unless ok.
template <class V>
void require(bool ok, const ModelConfig& c, const char* field, V value, const std::string& rule) {
  if (!ok) throw Error(cat(c.source, ": field ", field, " = ", value, " ", rule));
}

constexpr int kMaxSinkhornIters = 1000;

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  const json root = parse_json_strict(json_text, source);
  if (!root.is_object()) throw Error(cat(source, ": top level is not a JSON object"));
  const Fields f(root, source);

  // Identity (§1.2: refuse anything else) and the recipe keys this engine implements.
  f.expect("model_type", "deepseek_v4");
  f.expect("architectures", json::array({"DeepseekV4ForCausalLM"}));
  f.expect_if_present("num_key_value_heads", 1);
  f.expect_if_present("scoring_func", "sqrtsoftplus");
  f.expect_if_present("topk_method", "noaux_tc");
  f.expect_if_present("norm_topk_prob", true);
  f.expect_if_present("hidden_act", "silu");
  f.expect_if_present("tie_word_embeddings", false);
  f.expect_if_present("expert_dtype", "fp4");

  ModelConfig c;
  c.source = source;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.small_int("hidden_size");
  c.num_hidden_layers = f.small_int("num_hidden_layers");
  c.num_attention_heads = f.small_int("num_attention_heads");
  c.head_dim = f.small_int("head_dim");
  c.qk_rope_head_dim = f.small_int("qk_rope_head_dim");
  c.q_lora_rank = f.small_int("q_lora_rank");
  c.o_lora_rank = f.small_int("o_lora_rank");
  c.o_groups = f.small_int("o_groups");
  c.sliding_window = f.small_int("sliding_window");
  c.compress_ratios = f.int_list("compress_ratios");
  c.compress_rope_theta = f.number("compress_rope_theta");
  c.rope_theta = f.number("rope_theta");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.index_n_heads = f.small_int("index_n_heads");
  c.index_head_dim = f.small_int("index_head_dim");
  c.index_topk = f.small_int("index_topk");
  c.n_routed_experts = f.small_int("n_routed_experts");
  c.num_experts_per_tok = f.small_int("num_experts_per_tok");
  c.moe_intermediate_size = f.small_int("moe_intermediate_size");
  c.n_shared_experts = f.small_int("n_shared_experts");
  c.num_hash_layers = f.small_int("num_hash_layers");
  c.routed_scaling_factor = f.number("routed_scaling_factor");
  c.swiglu_limit = f.number("swiglu_limit");
  c.hc_mult = f.small_int("hc_mult");
  c.hc_sinkhorn_iters = f.small_int("hc_sinkhorn_iters");
  c.hc_eps = f.number("hc_eps");
  c.rms_norm_eps = f.number("rms_norm_eps");
  c.num_nextn_predict_layers = f.small_int_or("num_nextn_predict_layers", 0);
  c.bos_token_id = f.integer_or("bos_token_id", c.bos_token_id);
  c.eos_token_id = f.integer_or("eos_token_id", c.eos_token_id);

  const Fields rope = f.object("rope_scaling");
  // HF writes the YaRN tag as "type" (older) or "rope_type" (newer).
  rope.expect(rope.has("rope_type") ? "rope_type" : "type", "yarn");
  c.rope_scaling.factor = rope.number("factor");
  c.rope_scaling.original_max_position_embeddings =
      rope.integer("original_max_position_embeddings");
  c.rope_scaling.beta_fast = rope.number("beta_fast");
  c.rope_scaling.beta_slow = rope.number("beta_slow");

  // DSpark keys: present iff dspark_block_size exists; then all four are required.
  if (f.has("dspark_block_size")) {
    c.dspark.present = true;
    c.dspark.block_size = f.small_int("dspark_block_size");
    c.dspark.noise_token_id = f.integer("dspark_noise_token_id");
    c.dspark.target_layer_ids = f.int_list("dspark_target_layer_ids");
    c.dspark.markov_rank = f.small_int("dspark_markov_rank");
  }

  // A7: the codecs assume 128x128 blocks with ue8m0 scales (the rest is not read, C3).
  // Only DeepSeek's own fp8 recipe states them; other quantizers' configs (NVIDIA's
  // NVFP4 releases, CHECKPOINT.md §7 Q3) are not read: the recipe comes from dtypes.
  if (f.has("quantization_config")) {
    const Fields q = f.object("quantization_config");
    if (q.has("quant_method") && q.required("quant_method") == "fp8") {
      q.expect("weight_block_size", json::array({128, 128}));
      q.expect("scale_fmt", "ue8m0");
    }
  }

  validate_model_config(c);
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(path, ": cannot open config"));
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw Error(cat(path, ": read failed"));
  return parse_model_config(text.str(), path);
}

void validate_model_config(const ModelConfig& c) {
  // Positive sizes first, so the divisibility rules below are well defined.
  require(c.vocab_size >= 1, c, "vocab_size", c.vocab_size, "must be >= 1");
  require(c.num_hidden_layers >= 1, c, "num_hidden_layers", c.num_hidden_layers, "must be >= 1");
  const std::pair<const char*, int> positives[] = {
      {"hidden_size", c.hidden_size},
      {"num_attention_heads", c.num_attention_heads},
      {"head_dim", c.head_dim},
      {"qk_rope_head_dim", c.qk_rope_head_dim},
      {"q_lora_rank", c.q_lora_rank},
      {"o_lora_rank", c.o_lora_rank},
      {"o_groups", c.o_groups},
      {"index_n_heads", c.index_n_heads},
      {"index_head_dim", c.index_head_dim},
      {"n_routed_experts", c.n_routed_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"n_shared_experts", c.n_shared_experts},
      {"hc_mult", c.hc_mult},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters}};
  for (const auto& [field, value] : positives) require(value >= 1, c, field, value, "must be >= 1");

  // Upper bounds the engine's index types impose: token ids travel as int32 (OpHeader,
  // the tid2eid table), positions and row counts index int tables (attention index rows,
  // rope tables), and the per-row widths below are computed in int.
  require(c.vocab_size <= INT32_MAX, c, "vocab_size", c.vocab_size,
          "must be <= 2147483647 (token ids are 32-bit)");
  require(c.max_position_embeddings >= 2 && c.max_position_embeddings <= INT32_MAX, c,
          "max_position_embeddings", c.max_position_embeddings,
          "must lie in [2, 2147483647] (positions index 32-bit tables)");
  const std::pair<const char*, int64_t> row_widths[] = {
      {"hc_mult * hidden_size", int64_t{c.hc_mult} * c.hidden_size},
      {"num_attention_heads * head_dim", int64_t{c.num_attention_heads} * c.head_dim},
      {"index_n_heads * index_head_dim", int64_t{c.index_n_heads} * c.index_head_dim},
      {"n_routed_experts * moe_intermediate_size",
       int64_t{c.n_routed_experts} * c.moe_intermediate_size},
      {"(2 + hc_mult) * hc_mult", (int64_t{2} + c.hc_mult) * c.hc_mult}};
  for (const auto& [field, value] : row_widths)
    require(value <= INT32_MAX, c, field, value, "must be <= 2147483647 (a 32-bit row width)");

  // §6.2 dimension constraints.
  require(c.hidden_size % 128 == 0, c, "hidden_size", c.hidden_size, "must be a multiple of 128");
  require(c.num_attention_heads % c.o_groups == 0, c, "o_groups", c.o_groups,
          cat("must divide num_attention_heads = ", c.num_attention_heads));
  const int64_t group_width = int64_t{c.num_attention_heads} * c.head_dim / c.o_groups;
  require(group_width % 128 == 0, c, "o_groups", c.o_groups,
          cat("makes num_attention_heads * head_dim / o_groups = ", group_width,
              ", not a multiple of 128"));
  require(c.head_dim % 128 == 0, c, "head_dim", c.head_dim, "must be a multiple of 128");
  require(c.qk_rope_head_dim % 2 == 0 && c.qk_rope_head_dim <= c.head_dim, c, "qk_rope_head_dim",
          c.qk_rope_head_dim, cat("must be even and <= head_dim = ", c.head_dim));
  require(
      (c.head_dim - c.qk_rope_head_dim) % 64 == 0, c, "qk_rope_head_dim", c.qk_rope_head_dim,
      cat("must leave head_dim - qk_rope_head_dim a multiple of 64 (head_dim = ", c.head_dim, ")"));
  require(c.q_lora_rank % 128 == 0, c, "q_lora_rank", c.q_lora_rank, "must be a multiple of 128");
  require(c.o_lora_rank % 128 == 0, c, "o_lora_rank", c.o_lora_rank, "must be a multiple of 128");
  require(is_pow2(c.index_head_dim) && c.index_head_dim % 32 == 0, c, "index_head_dim",
          c.index_head_dim, "must be a power of two and a multiple of 32");
  require(c.index_head_dim >= c.qk_rope_head_dim, c, "index_head_dim", c.index_head_dim,
          cat("must be >= qk_rope_head_dim = ", c.qk_rope_head_dim));
  require(int64_t{c.index_n_heads} * c.index_head_dim % 128 == 0, c, "index_n_heads",
          c.index_n_heads, "times index_head_dim must be a multiple of 128");
  require(c.index_topk >= 1, c, "index_topk", c.index_topk, "must be >= 1");
  // A window or a selection wider than the longest sequence attends nothing more; a
  // larger value is a corrupted config (and sizes every KV ring by it).
  require(c.sliding_window >= 1 && c.sliding_window <= c.max_position_embeddings, c,
          "sliding_window", c.sliding_window,
          cat("must lie in [1, max_position_embeddings = ", c.max_position_embeddings, "]"));
  require(c.index_topk <= c.max_position_embeddings, c, "index_topk", c.index_topk,
          cat("must be <= max_position_embeddings = ", c.max_position_embeddings));
  // MODEL.md §4.4: Sinkhorn on an hc x hc matrix converges geometrically; the release
  // runs 20 iterations and f32 stops changing well before 1000, so more is a corrupted
  // config (each iteration runs for every row of every layer, twice).
  require(c.hc_sinkhorn_iters <= kMaxSinkhornIters, c, "hc_sinkhorn_iters", c.hc_sinkhorn_iters,
          cat("must be <= ", kMaxSinkhornIters));
  // Routing and activation constants (MODEL.md D16): a routed weight scale must be
  // positive; swiglu_limit 0 disables the clamp, a negative limit is no limit at all.
  require(c.routed_scaling_factor > 0, c, "routed_scaling_factor", c.routed_scaling_factor,
          "must be > 0");
  require(c.swiglu_limit >= 0, c, "swiglu_limit", c.swiglu_limit,
          "must be >= 0 (0 disables the clamp, MODEL.md D16)");
  require(c.num_nextn_predict_layers >= 0, c, "num_nextn_predict_layers",
          c.num_nextn_predict_layers, "must be >= 0");
  require(c.num_hash_layers >= 0 && c.num_hash_layers <= c.num_hidden_layers, c, "num_hash_layers",
          c.num_hash_layers, cat("must lie in [0, num_hidden_layers = ", c.num_hidden_layers, "]"));
  require(c.num_experts_per_tok <= c.n_routed_experts, c, "num_experts_per_tok",
          c.num_experts_per_tok, cat("must be <= n_routed_experts = ", c.n_routed_experts));
  require(c.moe_intermediate_size % 128 == 0, c, "moe_intermediate_size", c.moe_intermediate_size,
          "must be a multiple of 128");
  require(c.bos_token_id >= 0 && c.bos_token_id < c.vocab_size, c, "bos_token_id", c.bos_token_id,
          cat("must lie in [0, vocab_size = ", c.vocab_size, ")"));
  require(c.eos_token_id >= 0 && c.eos_token_id < c.vocab_size, c, "eos_token_id", c.eos_token_id,
          cat("must lie in [0, vocab_size = ", c.vocab_size, ")"));

  // Rope (§1.2, §6.2): YaRN's original context lies below the maximum.
  // The base's logarithm divides the YaRN correction dimension (MODEL.md rope): > 1.
  require(c.rope_theta > 1, c, "rope_theta", c.rope_theta, "must be > 1");
  require(c.compress_rope_theta > 1, c, "compress_rope_theta", c.compress_rope_theta,
          "must be > 1");
  require(c.rope_scaling.beta_fast > 0 && c.rope_scaling.beta_slow > 0 &&
              c.rope_scaling.beta_fast >= c.rope_scaling.beta_slow,
          c, "rope_scaling.beta_fast", c.rope_scaling.beta_fast,
          cat("must be >= rope_scaling.beta_slow = ", c.rope_scaling.beta_slow, ", both > 0"));
  require(c.rope_scaling.factor >= 1, c, "rope_scaling.factor", c.rope_scaling.factor,
          "must be >= 1");
  require(c.rope_scaling.original_max_position_embeddings >= 1 &&
              c.rope_scaling.original_max_position_embeddings < c.max_position_embeddings,
          c, "rope_scaling.original_max_position_embeddings",
          c.rope_scaling.original_max_position_embeddings,
          cat("must lie in [1, max_position_embeddings = ", c.max_position_embeddings, ")"));
  require(c.rms_norm_eps > 0, c, "rms_norm_eps", c.rms_norm_eps, "must be > 0");
  require(c.hc_eps > 0, c, "hc_eps", c.hc_eps, "must be > 0");

  // DSpark (SPECDECODE R-D1, CHECKPOINT R19): targets distinct trunk layers, noise < V,
  // B >= 1 and the B + 1 verify rows fit the window.
  const DsparkConfig& d = c.dspark;
  int drafter_blocks = 0;
  if (d.present) {
    drafter_blocks = static_cast<int>(d.target_layer_ids.size());
    require(drafter_blocks >= 1, c, "dspark_target_layer_ids", "[]", "must not be empty");
    std::set<int> seen;
    for (int id : d.target_layer_ids) {
      require(id >= 0 && id < c.num_hidden_layers, c, "dspark_target_layer_ids", id,
              cat("must lie in [0, num_hidden_layers = ", c.num_hidden_layers, ")"));
      require(seen.insert(id).second, c, "dspark_target_layer_ids", id, "appears twice");
    }
    require(d.noise_token_id >= 0 && d.noise_token_id < c.vocab_size, c, "dspark_noise_token_id",
            d.noise_token_id, cat("must lie in [0, vocab_size = ", c.vocab_size, ")"));
    require(d.block_size >= 1 && d.block_size + 1 <= c.sliding_window, c, "dspark_block_size",
            d.block_size,
            cat("must be >= 1 with block_size + 1 <= sliding_window = ", c.sliding_window));
    require(d.markov_rank >= 1, c, "dspark_markov_rank", d.markov_rank, "must be >= 1");
  }

  // compress_ratios (§6.2, A6): one entry per trunk layer and drafter block; values 0,
  // 4 (overlap) or a coarse r > 4; entries past the trunk are drafter blocks, r = 0.
  const size_t needed = static_cast<size_t>(c.num_hidden_layers + drafter_blocks);
  require(c.compress_ratios.size() >= needed, c, "compress_ratios",
          cat("<", c.compress_ratios.size(), " entries>"),
          cat("needs >= num_hidden_layers + drafter blocks = ", needed, " entries"));
  for (size_t l = 0; l < c.compress_ratios.size(); ++l) {
    const int r = c.compress_ratios[l];
    const std::string field = cat("compress_ratios[", l, "]");
    if (static_cast<int>(l) < c.num_hidden_layers)
      require(r == 0 || (r >= 4 && r <= c.max_position_embeddings), c, field.c_str(), r,
              cat("must be 0, 4 or a coarse ratio > 4 (at most max_position_embeddings = ",
                  c.max_position_embeddings, ")"));
    else
      require(r == 0, c, field.c_str(), r, "is a drafter block and must be 0");
  }
}

}  // namespace dsv4
