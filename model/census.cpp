// The tensor census of CHECKPOINT.md §2 (names, dtypes, shapes) with the byte classes of
// §5.1. Block kinds follow from the config: compressor iff r > 0, indexer iff r = 4,
// tid2eid iff hash layer, gate.bias otherwise (§2, A6).
#include "model/census.h"

#include "base/error.h"

namespace dsv4 {

const char* byte_class_name(ByteClass c) {
  switch (c) {
    case ByteClass::fp8_attn: return "fp8_attn";
    case ByteClass::fp8_shared: return "fp8_shared";
    case ByteClass::experts_packed: return "experts_packed";
    case ByteClass::expert_scales: return "expert_scales";
    case ByteClass::indexer: return "indexer";
    case ByteClass::compressor: return "compressor";
    case ByteClass::router: return "router";
    case ByteClass::hc: return "hc";
    case ByteClass::norms_sink: return "norms_sink";
    case ByteClass::embed: return "embed";
    case ByteClass::head: return "head";
    case ByteClass::drafter_extra: return "drafter_extra";
  }
  return "?";
}

uint64_t CensusEntry::bytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

namespace {

int64_t ceil128(int64_t a) { return (a + 127) / 128; }

// Appends entries of one block (or the globals) under a common prefix and layer id.
class CensusBuilder {
 public:
  CensusBuilder(std::vector<CensusEntry>& out, std::string prefix, int layer_id)
      : out_(out), prefix_(std::move(prefix)), layer_id_(layer_id) {}

  void add(const std::string& stem, DType dt, std::vector<int64_t> shape, ByteClass cls) {
    out_.push_back(CensusEntry{prefix_ + stem, dt, std::move(shape), cls, layer_id_});
  }
  // FP8 block-scaled linear [rows, cols] (§3.4): .weight F8_E4M3 + .scale F8_E8M0 grid.
  void fp8(const std::string& stem, int64_t rows, int64_t cols, ByteClass cls) {
    add(stem + ".weight", DType::F8_E4M3, {rows, cols}, cls);
    add(stem + ".scale", DType::F8_E8M0, {ceil128(rows), ceil128(cols)}, cls);
  }
  // One routed-expert projection, logical [rows, cols] (§2.5).
  void fp4(const std::string& stem, int64_t rows, int64_t cols, ExpertRecipe r,
           bool input_scale) {
    const ExpertFormat& f = expert_format(r);
    const int64_t blocks = cols / f.group;
    if (r == ExpertRecipe::mxfp4) {
      add(stem + ".weight", DType::I8, {rows, cols / 2}, ByteClass::experts_packed);
      add(stem + f.scale_suffix, DType::F8_E8M0, {rows, blocks}, ByteClass::expert_scales);
    } else {
      add(stem + ".weight", DType::U8, {rows, cols / 2}, ByteClass::experts_packed);
      add(stem + f.scale_suffix, DType::F8_E4M3, {rows, blocks}, ByteClass::expert_scales);
      add(stem + ".weight_scale_2", DType::F32, {}, ByteClass::expert_scales);
      if (input_scale) add(stem + ".input_scale", DType::F32, {}, ByteClass::expert_scales);
    }
  }
  // hc_head_{fn,base,scale} (§2.6, §2.7).
  void hc_head(int64_t hc, int64_t H, ByteClass cls) {
    add("hc_head_fn", DType::F32, {hc, hc * H}, cls);
    add("hc_head_base", DType::F32, {hc}, cls);
    add("hc_head_scale", DType::F32, {1}, cls);
  }

 private:
  std::vector<CensusEntry>& out_;
  std::string prefix_;
  int layer_id_;
};

// §2.2: a compressor with latent Lc = c·d over width H, ratio r.
void add_compressor(CensusBuilder& b, const std::string& stem, int64_t r, int64_t d, int64_t H,
                    ByteClass cls) {
  const int64_t latent = (r == 4 ? 2 : 1) * d;
  b.add(stem + ".wkv.weight", DType::BF16, {latent, H}, cls);
  b.add(stem + ".wgate.weight", DType::BF16, {latent, H}, cls);
  b.add(stem + ".ape", DType::F32, {r, latent}, cls);
  b.add(stem + ".norm.weight", DType::BF16, {d}, cls);
}

}  // namespace

int census_drafter_blocks(const ModelConfig& c, const CensusOptions& o) {
  if (o.drafter_blocks >= 0) return o.drafter_blocks;
  return c.dspark.present ? static_cast<int>(c.dspark.target_layer_ids.size()) : 0;
}

std::vector<CensusEntry> global_census(const ModelConfig& c) {
  std::vector<CensusEntry> out;
  CensusBuilder g(out, "", -1);
  const int64_t V = c.vocab_size, H = c.hidden_size;
  g.add("embed.weight", DType::BF16, {V, H}, ByteClass::embed);
  g.add("head.weight", DType::BF16, {V, H}, ByteClass::head);
  g.add("norm.weight", DType::BF16, {H}, ByteClass::head);
  g.hc_head(c.hc_mult, H, ByteClass::head);
  return out;
}

std::vector<CensusEntry> block_census(const ModelConfig& c, const CensusOptions& o,
                                      int layer_id) {
  const int L = c.num_hidden_layers;
  const int n_blk = census_drafter_blocks(c, o);
  if (layer_id < 0 || layer_id >= L + n_blk)
    throw Error(cat("census: layer id ", layer_id, " outside [0, ", L + n_blk, ")"));
  if (static_cast<size_t>(layer_id) >= c.compress_ratios.size())
    throw Error(cat(c.source, ": compress_ratios has ", c.compress_ratios.size(),
                    " entries, layer id ", layer_id, " needs one"));
  const bool trunk = layer_id < L;
  const int k = layer_id - L;  // drafter block index
  std::vector<CensusEntry> out;
  CensusBuilder b(out, trunk ? cat("layers.", layer_id, ".") : cat("mtp.", k, "."), layer_id);

  const int64_t H = c.hidden_size, nh = c.num_attention_heads, D = c.head_dim;
  const int64_t Qr = c.q_lora_rank, Or = c.o_lora_rank, G = c.o_groups;
  const int64_t hc = c.hc_mult, M = c.hc_mix(), E = c.n_routed_experts;
  const int64_t I = c.moe_intermediate_size, S = c.n_shared_experts;
  const int64_t r = c.ratio(layer_id);

  // §2.1 attention
  b.fp8("attn.wq_a", Qr, H, ByteClass::fp8_attn);
  b.add("attn.q_norm.weight", DType::BF16, {Qr}, ByteClass::norms_sink);
  b.fp8("attn.wq_b", nh * D, Qr, ByteClass::fp8_attn);
  b.fp8("attn.wkv", D, H, ByteClass::fp8_attn);
  b.add("attn.kv_norm.weight", DType::BF16, {D}, ByteClass::norms_sink);
  b.fp8("attn.wo_a", G * Or, nh * D / G, ByteClass::fp8_attn);
  b.fp8("attn.wo_b", H, G * Or, ByteClass::fp8_attn);
  b.add("attn.attn_sink", DType::F32, {nh}, ByteClass::norms_sink);
  b.add("attn_norm.weight", DType::BF16, {H}, ByteClass::norms_sink);
  b.add("ffn_norm.weight", DType::BF16, {H}, ByteClass::norms_sink);

  // §2.2 compressor (r > 0) and indexer (r = 4)
  if (r > 0) add_compressor(b, "attn.compressor", r, D, H, ByteClass::compressor);
  if (r == 4) {
    const int64_t Ih = c.index_n_heads, Id = c.index_head_dim;
    b.fp8("attn.indexer.wq_b", Ih * Id, Qr, ByteClass::indexer);
    b.add("attn.indexer.weights_proj.weight", DType::BF16, {Ih, H}, ByteClass::indexer);
    add_compressor(b, "attn.indexer.compressor", 4, Id, H, ByteClass::indexer);
  }

  // §2.3 hyper-connections
  for (const char* site : {"hc_attn", "hc_ffn"}) {
    b.add(cat(site, "_fn"), DType::F32, {M, hc * H}, ByteClass::hc);
    b.add(cat(site, "_base"), DType::F32, {M}, ByteClass::hc);
    b.add(cat(site, "_scale"), DType::F32, {3}, ByteClass::hc);
  }

  // §2.4 router and shared expert
  b.add("ffn.gate.weight", DType::BF16, {E, H}, ByteClass::router);
  if (trunk && c.is_hash(layer_id))
    b.add("ffn.gate.tid2eid", DType::I64, {c.vocab_size, c.num_experts_per_tok},
          ByteClass::router);
  else
    b.add("ffn.gate.bias", DType::F32, {E}, ByteClass::router);
  b.fp8("ffn.shared_experts.w1", S * I, H, ByteClass::fp8_shared);
  b.fp8("ffn.shared_experts.w2", H, S * I, ByteClass::fp8_shared);
  b.fp8("ffn.shared_experts.w3", S * I, H, ByteClass::fp8_shared);

  // §2.5 routed experts
  const ExpertRecipe recipe = trunk ? o.trunk_experts : o.drafter_experts;
  for (int64_t e = 0; e < E; ++e) {
    const std::string stem = cat("ffn.experts.", e, ".");
    b.fp4(stem + "w1", I, H, recipe, o.nvfp4_input_scale);
    b.fp4(stem + "w2", H, I, recipe, o.nvfp4_input_scale);
    b.fp4(stem + "w3", I, H, recipe, o.nvfp4_input_scale);
  }

  if (trunk) return out;
  const ByteClass x = ByteClass::drafter_extra;
  if (c.dspark.present) {
    // §2.7 DSpark extras on mtp.0 and mtp.{N_blk-1}
    const int64_t T = static_cast<int64_t>(c.dspark.target_layer_ids.size());
    const int64_t V = c.vocab_size, R = c.dspark.markov_rank;
    if (k == 0) {
      b.fp8("main_proj", H, T * H, x);
      b.add("main_norm.weight", DType::BF16, {H}, x);
    }
    if (k == n_blk - 1) {
      b.add("norm.weight", DType::BF16, {H}, x);
      b.hc_head(hc, H, x);
      b.add("markov_head.markov_w1.weight", DType::BF16, {V, R}, x);
      b.add("markov_head.markov_w2.weight", DType::BF16, {V, R}, x);
      b.add("confidence_head.proj.weight", DType::BF16, {1, H + R}, x);
    }
  } else {
    // §2.8 NextN block mtp.0
    b.fp8("e_proj", H, H, x);
    b.fp8("h_proj", H, H, x);
    b.add("enorm.weight", DType::BF16, {H}, x);
    b.add("hnorm.weight", DType::BF16, {H}, x);
    b.add("norm.weight", DType::BF16, {H}, x);
    b.hc_head(hc, H, x);
  }
  return out;
}

std::vector<CensusEntry> tensor_census(const ModelConfig& c, const CensusOptions& o) {
  std::vector<CensusEntry> out = global_census(c);
  const int n = c.num_hidden_layers + census_drafter_blocks(c, o);
  for (int l = 0; l < n; ++l) {
    std::vector<CensusEntry> blk = block_census(c, o, l);
    out.insert(out.end(), std::make_move_iterator(blk.begin()),
               std::make_move_iterator(blk.end()));
  }
  return out;
}

uint64_t layer_bytes(const std::vector<CensusEntry>& census, int layer_id) {
  uint64_t sum = 0;
  for (const CensusEntry& e : census)
    if (e.layer_id == layer_id) sum += e.bytes();
  return sum;
}

}  // namespace dsv4
