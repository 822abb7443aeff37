// Synthetic writer (CHECKPOINT.md §3.8, §6.1) and the checkpoint loader with its refusals
// (§4): determinism, a full writer -> Checkpoint round trip of the tiny model, values
// recomputed from the §3.8 recipe, and one corrupted checkpoint per refusal.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "error_text.h"
#include "model/census.h"
#include "model/checkpoint.h"
#include "model/codecs.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/synthetic.h"

using namespace dsv4;
using dsv4::test::error_text;
using dsv4::test::mentions;
namespace fs = std::filesystem;

namespace {

constexpr const char* kShard1 = "model-00001-of-00003.safetensors";
constexpr const char* kShard2 = "model-00002-of-00003.safetensors";
constexpr const char* kShard3 = "model-00003-of-00003.safetensors";
constexpr uint64_t kTinyBytes = 21153332;                 // §6.1
constexpr uint64_t kTinyInputScaleBytes = 7 * 16 * 3 * 4;  // never handed out (C3)

fs::path scratch(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() /
                     ("dsv4_ckpt_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

fs::path write_tiny(const std::string& tag, uint64_t seed,
                    ExpertRecipe trunk = ExpertRecipe::nvfp4, int threads = 0) {
  const fs::path p = scratch(tag);
  SyntheticOptions o;
  o.seed = seed;
  o.trunk_experts = trunk;
  o.threads = threads;
  write_synthetic_checkpoint(tiny_preset(), p.string(), o);
  return p;
}

// The tiny checkpoint with seed 1, written once per test run and removed at exit.
const fs::path& base_dir() {
  struct Written {
    fs::path path = write_tiny("base", 1);
    ~Written() { fs::remove_all(path); }
  };
  static const Written base;
  return base.path;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(); }

std::vector<TensorData> read_shard(const fs::path& p) {
  SafetensorsFile f(p.string());
  std::vector<TensorData> out;
  for (const SafetensorsEntry& e : f.entries()) {
    const TensorView v = f.view(e.name);
    out.push_back(TensorData{e.name, e.dtype, e.shape,
                             std::vector<uint8_t>(v.data, v.data + v.nbytes)});
  }
  return out;
}

// A copy of the base checkpoint in which `edit` changed tensor `name` (returning false
// drops it from its shard; `drop_from_index` also removes it from the weight map).
fs::path corrupt(const std::string& tag, const std::string& name,
                 const std::function<bool(TensorData&)>& edit, bool drop_from_index = true) {
  const fs::path dir = scratch(tag);
  fs::copy(base_dir(), dir, fs::copy_options::recursive);
  nlohmann::json index = read_json(dir / "model.safetensors.index.json");
  const fs::path shard = dir / index["weight_map"][name].get<std::string>();
  std::vector<TensorData> tensors = read_shard(shard);
  const auto it = std::find_if(tensors.begin(), tensors.end(),
                               [&](const TensorData& t) { return t.name == name; });
  REQUIRE(it != tensors.end());
  if (!edit(*it)) {
    tensors.erase(it);
    if (drop_from_index) {
      index["weight_map"].erase(name);
      write_json(dir / "model.safetensors.index.json", index);
    }
  }
  write_safetensors(shard.string(), tensors);
  return dir;
}

void put_f32(TensorData& t, size_t i, float v) { std::memcpy(t.bytes.data() + 4 * i, &v, 4); }

// §3.8 recipe, written independently of the writer: SplitMix64 seeded with
// FNV-1a-64(name) xor seed, u = top 53 bits / 2^53.
struct SpecRng {
  uint64_t s;
  SpecRng(const std::string& name, uint64_t seed) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
    s = h ^ seed;
  }
  double u() {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) / 9007199254740992.0;
  }
};

float read_f32(const TensorView& v, int64_t i) {
  float x;
  std::memcpy(&x, v.data + 4 * i, 4);
  return x;
}

// Loads everything a full engine would, across all ranks.
void load_everything(Checkpoint& ck) {
  for (int l = 0; l < ck.config().num_hidden_layers; ++l) ck.load_block(l);
  ck.load_embed();
  ck.load_head_matrix();
  ck.load_head();
  ck.load_drafter();
}

}  // namespace

TEST_CASE("synthetic writer: same seed, byte-identical files (any thread count); another seed differs") {
  const fs::path a = base_dir();
  const fs::path b = write_tiny("again", 1, ExpertRecipe::nvfp4, /*threads=*/1);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(a)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"config.json", "model.safetensors.index.json", kShard1,
                                       kShard2, kShard3});
  for (const std::string& f : files) {
    CAPTURE(f);
    CHECK(fs::exists(b / f));
    CHECK(read_bytes(a / f) == read_bytes(b / f));
  }
  const fs::path c = write_tiny("seed2", 2, ExpertRecipe::nvfp4, /*threads=*/3);
  CHECK(read_bytes(a / kShard2) != read_bytes(c / kShard2));
  fs::remove_all(b);
  fs::remove_all(c);
}

TEST_CASE("writer -> Checkpoint round trip of the tiny model (§6.1 census and shards)") {
  Checkpoint ck(base_dir().string());
  const auto census = tensor_census(tiny_preset(), CensusOptions{});
  std::vector<std::string> expected;
  for (const auto& e : census) expected.push_back(e.name);
  std::sort(expected.begin(), expected.end());
  CHECK(ck.names() == expected);
  uint64_t total = 0;
  for (const auto& e : census) {
    CAPTURE(e.name);
    const TensorView v = ck.tensor(e.name);
    CHECK(v.dtype == e.dtype);
    CHECK(v.shape == e.shape);
    CHECK(v.nbytes == e.bytes());
    total += v.nbytes;
  }
  CHECK(total == kTinyBytes);
  CHECK(read_json(base_dir() / "model.safetensors.index.json")["metadata"]["total_size"] ==
        kTinyBytes);
  // §6.1 shards: 1 = embed + layers 0-3; 2 = layers 4-6 + head, norm, hc_head_*; 3 = mtp.*
  CHECK(ck.shard_of("embed.weight") == kShard1);
  CHECK(ck.shard_of("layers.3.ffn.experts.15.w2.weight") == kShard1);
  CHECK(ck.shard_of("layers.4.attn.wq_a.weight") == kShard2);
  CHECK(ck.shard_of("layers.6.hc_ffn_fn") == kShard2);
  CHECK(ck.shard_of("head.weight") == kShard2);
  CHECK(ck.shard_of("hc_head_scale") == kShard2);
  CHECK(ck.shard_of("mtp.0.main_proj.weight") == kShard3);
  CHECK(ck.shard_of("mtp.2.markov_head.markov_w2.weight") == kShard3);
  CHECK(ck.drafter_kind() == DrafterKind::dspark);
  CHECK(ck.drafter_blocks() == 3);
}

TEST_CASE("typed loaders: block structure, lazy shards, bytes_loaded") {
  Checkpoint ck(base_dir().string());
  const BlockWeights b0 = ck.load_block(0);
  CHECK(ck.shards_opened() == std::vector<std::string>{kShard1});  // a rank maps only its shards
  CHECK(b0.hash);
  CHECK(b0.ratio == 0);
  CHECK_FALSE(b0.compressor.has_value());
  CHECK_FALSE(b0.indexer.has_value());
  CHECK(b0.tid2eid.size() == 512 * 6);
  CHECK_FALSE(b0.gate_bias.has_value());
  CHECK(b0.expert_recipe == ExpertRecipe::nvfp4);
  REQUIRE(b0.experts.size() == 16);
  CHECK(b0.experts[7].w2.rows == 256);
  CHECK(b0.experts[7].w2.cols == 128);
  CHECK(b0.wo_a.out() == 512);

  const BlockWeights b2 = ck.load_block(2);
  REQUIRE(b2.compressor.has_value());
  CHECK(b2.compressor->overlap);
  CHECK(b2.compressor->latent() == 256);
  REQUIRE(b2.indexer.has_value());
  CHECK(b2.indexer->compressor.rotate);
  CHECK(b2.indexer->compressor.d == 128);
  CHECK(b2.hash);

  const BlockWeights b5 = ck.load_block(5);
  REQUIRE(b5.compressor.has_value());
  CHECK(b5.compressor->ratio == 16);
  CHECK_FALSE(b5.compressor->overlap);
  CHECK_FALSE(b5.indexer.has_value());
  CHECK(b5.gate_bias.has_value());
  CHECK(b5.tid2eid.empty());

  const DrafterWeights d = ck.load_drafter();
  REQUIRE(d.blocks.size() == 3);
  CHECK(d.blocks[1].layer_id == 8);
  CHECK(d.blocks[0].expert_recipe == ExpertRecipe::mxfp4);
  CHECK(d.main_proj.in() == 768);
  CHECK(d.markov_w1.shape == std::vector<int64_t>{512, 32});
  CHECK(d.confidence.shape == std::vector<int64_t>{1, 256 + 32});

  Checkpoint all(base_dir().string());
  load_everything(all);
  CHECK(all.bytes_loaded() == kTinyBytes - kTinyInputScaleBytes);
  CHECK(mentions(error_text([&] { all.load_block(10); }), "layer id 10"));
}

TEST_CASE("stored values follow the §3.8 synthetic recipe") {
  Checkpoint ck(base_dir().string());
  SUBCASE("F32 attn_sink = uniform(-1, 1) exactly") {
    const TensorView v = ck.tensor("layers.0.attn.attn_sink");
    SpecRng rng("layers.0.attn.attn_sink", 1);
    for (int64_t i = 0; i < v.numel(); ++i)
      CHECK(read_f32(v, i) == static_cast<float>(-1.0 + 2.0 * rng.u()));
  }
  SUBCASE("BF16 norm weight = bf16(uniform(0.9, 1.1))") {
    const TensorView v = ck.tensor("layers.1.attn_norm.weight");
    SpecRng rng("layers.1.attn_norm.weight", 1);
    for (int64_t i = 0; i < v.numel(); ++i) {
      const float m = static_cast<float>(0.9 + 0.2 * rng.u());
      // bf16 keeps 8 significant bits: RNE error <= half an ulp <= 2^-8 relative
      CHECK(std::fabs(v.f32_at(i) - m) <= std::ldexp(std::fabs(m), -8));
    }
  }
  SUBCASE("FP8 wq_a: block scales per rule 4, codes within E4M3 rounding of the master") {
    const Fp8Linear w = ck.load_block(0).wq_a;  // [256, 256]
    const std::vector<float> dec = decode_fp8_linear(w);
    SpecRng rng("layers.0.attn.wq_a.weight", 1);
    const double a = std::sqrt(3.0 / 256.0);
    std::vector<double> amax(4, 0.0);
    for (int64_t r = 0; r < 256; ++r)
      for (int64_t c = 0; c < 256; ++c) {
        const float m = static_cast<float>(-a + 2.0 * a * rng.u());
        const int blk = static_cast<int>((r / 128) * 2 + c / 128);
        amax[static_cast<size_t>(blk)] = std::max(amax[static_cast<size_t>(blk)], double{std::fabs(m)});
        const double s = std::ldexp(1.0, int{w.scale.data[blk]} - 127);
        // E4M3: 3 mantissa bits -> relative error <= 2^-4; subnormal step 2^-9 -> 2^-10 abs
        CHECK(std::fabs(dec[static_cast<size_t>(r * 256 + c)] - m) <=
              std::max(std::ldexp(double{std::fabs(m)}, -4), std::ldexp(s, -10)));
      }
    for (int blk = 0; blk < 4; ++blk) {  // k smallest with amax <= 448 * 2^k
      const double s = std::ldexp(1.0, int{w.scale.data[blk]} - 127);
      CHECK(amax[static_cast<size_t>(blk)] <= 448.0 * s);
      CHECK(amax[static_cast<size_t>(blk)] > 224.0 * s);
    }
  }
  SUBCASE("tid2eid rows: first K of a Fisher-Yates shuffle of 0..E-1") {
    const BlockWeights b = ck.load_block(1);
    SpecRng rng("layers.1.ffn.gate.tid2eid", 1);
    for (int t = 0; t < 3; ++t) {
      std::vector<int> perm(16);
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = 15; i > 0; --i) std::swap(perm[i], perm[static_cast<size_t>(rng.u() * (i + 1))]);
      for (int j = 0; j < 6; ++j) CHECK(b.tid2eid[static_cast<size_t>(t * 6 + j)] == perm[j]);
    }
  }
  SUBCASE("NVFP4 scalars: weight_scale_2 a positive power of two, input_scale 1") {
    const BlockWeights b = ck.load_block(4);
    for (const ExpertWeights& e : b.experts)
      for (const Fp4Linear* p : {&e.w1, &e.w2, &e.w3}) {
        int ex;
        CHECK(std::frexp(p->scale_2, &ex) == 0.5f);
      }
    CHECK(read_f32(ck.tensor("layers.4.ffn.experts.9.w3.input_scale"), 0) == 1.0f);
  }
  SUBCASE("routed gate/up masters are wider than plain projections (swiglu clamp coverage)") {
    const BlockWeights b = ck.load_block(3);
    const double plain = std::sqrt(3.0 / 256.0);  // ±sqrt(3 / fan_in), H = 256
    float w1_max = 0, w2_max = 0;
    for (float x : decode_fp4_linear(b.experts[0].w1)) w1_max = std::max(w1_max, std::fabs(x));
    for (float x : decode_fp4_linear(b.experts[0].w2)) w2_max = std::max(w2_max, std::fabs(x));
    CHECK(w1_max > 2.0 * plain);
    CHECK(w2_max <= 1.25 * std::sqrt(3.0 / 128.0));  // w2 plain, fan_in I = 128; FP4 rounding
  }
}

TEST_CASE("MXFP4 trunk variant (--experts mxfp4, C1) loads with the official recipe") {
  const fs::path dir = write_tiny("mxfp4", 1, ExpertRecipe::mxfp4);
  Checkpoint ck(dir.string());
  const BlockWeights b = ck.load_block(6);
  CHECK(b.expert_recipe == ExpertRecipe::mxfp4);
  CHECK(b.experts[0].w1.weight.dtype == DType::I8);
  CHECK(b.experts[0].w1.scale.dtype == DType::F8_E8M0);
  CensusOptions o;
  o.trunk_experts = ExpertRecipe::mxfp4;
  CHECK(ck.names().size() == tensor_census(tiny_preset(), o).size());
  load_everything(ck);
  fs::remove_all(dir);
}

TEST_CASE("a single model.safetensors without index loads; total_size as a string") {
  SUBCASE("single file") {
    const fs::path dir = scratch("single");
    fs::create_directories(dir);
    fs::copy_file(base_dir() / "config.json", dir / "config.json");
    std::vector<TensorData> all;
    for (const char* s : {kShard1, kShard2, kShard3}) {
      auto part = read_shard(base_dir() / s);
      std::move(part.begin(), part.end(), std::back_inserter(all));
    }
    write_safetensors((dir / "model.safetensors").string(), all);
    Checkpoint ck(dir.string());
    CHECK(ck.names().size() == 1979);
    CHECK(ck.load_block(5).ratio == 16);
    CHECK(ck.drafter_blocks() == 3);
    fs::remove_all(dir);
  }
  SUBCASE("decimal string, and a wrong value only warns") {
    for (const char* value : {"21153332", "12345"}) {
      const fs::path dir = scratch("total");
      fs::copy(base_dir(), dir, fs::copy_options::recursive);
      nlohmann::json index = read_json(dir / "model.safetensors.index.json");
      index["metadata"]["total_size"] = value;
      write_json(dir / "model.safetensors.index.json", index);
      Checkpoint ck(dir.string());
      CHECK_NOTHROW(load_everything(ck));
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("load refusals name file and tensor (§4)") {
  struct Case {
    const char* what;
    std::string tensor;
    std::function<bool(TensorData&)> edit;
    int load_layer;             // -1: refused by the constructor
    std::vector<std::string> mention;
  };
  const std::string s2 = "layers.0.ffn.experts.5.w1.weight_scale_2";
  const std::vector<Case> cases = {
      {"E8M0 0xFF in an FP8 scale (R7)", "layers.4.attn.wq_b.scale",
       [](TensorData& t) { t.bytes[3] = 0xFF; return true; }, 4, {kShard2, "0xFF"}},
      {"E8M0 0xFF in an MXFP4 expert scale (R7)", "mtp.0.ffn.experts.3.w2.scale",
       [](TensorData& t) { t.bytes[100] = 0xFF; return true; }, 7, {kShard3, "0xFF"}},
      {"E8M0 0x00 in a scale (A5)", "layers.1.ffn.shared_experts.w2.scale",
       [](TensorData& t) { t.bytes[0] = 0x00; return true; }, 1, {kShard1, "0x00"}},
      {"NVFP4 weight_scale_2 zero (R12/C4)", s2,
       [](TensorData& t) { put_f32(t, 0, 0.0f); return true; }, 0, {kShard1, "weight_scale_2"}},
      {"NVFP4 weight_scale_2 negative (R12/C4)", s2,
       [](TensorData& t) { put_f32(t, 0, -0.5f); return true; }, 0, {kShard1, "> 0"}},
      {"NVFP4 weight_scale_2 NaN (R12/C4)", s2,
       [](TensorData& t) { put_f32(t, 0, std::nanf("")); return true; }, 0, {kShard1, "nan"}},
      {"NVFP4 weight_scale_2 +Inf (R12/C4)", s2,
       [](TensorData& t) { put_f32(t, 0, INFINITY); return true; }, 0, {kShard1, "inf"}},
      {"E4M3 NaN code in an FP8 weight (A4)", "layers.6.attn.wo_b.weight",
       [](TensorData& t) { t.bytes[77] = 0x7F; return true; }, 6, {kShard2, "NaN code"}},
      {"NVFP4 block scale with the sign bit (A4)", "layers.2.ffn.experts.0.w3.weight_scale",
       [](TensorData& t) { t.bytes[5] |= 0x80; return true; }, 2, {kShard1, "sign bit"}},
      {"NaN in an F32 island (R21)", "layers.3.hc_attn_base",
       [](TensorData& t) { put_f32(t, 2, std::nanf("")); return true; }, 3, {kShard1, "element 2"}},
      {"Inf in a BF16 island (R21)", "mtp.2.markov_head.markov_w1.weight",
       [](TensorData& t) { t.bytes[11] = 0x7F; t.bytes[10] = 0x80; return true; }, -2,
       {kShard3, "element 5"}},
      {"tid2eid id out of range (R14)", "layers.2.ffn.gate.tid2eid",
       [](TensorData& t) { t.bytes[8 * 13] = 16; std::memset(t.bytes.data() + 8 * 13 + 1, 0, 7); return true; },
       2, {kShard1, "row 2", "16"}},
      {"tid2eid repeated id in a row (R14)", "layers.0.ffn.gate.tid2eid",
       [](TensorData& t) { std::memcpy(t.bytes.data() + 8 * 10, t.bytes.data() + 8 * 7, 8); return true; },
       0, {kShard1, "row 1", "repeats"}},
      {"tid2eid wrong shape (R14)", "layers.1.ffn.gate.tid2eid",
       [](TensorData& t) { t.shape = {256, 12}; return true; }, 1, {kShard1, "shape [256, 12]", "[512, 6]"}},
      {"missing tensor (R1)", "layers.5.attn.kv_norm.weight",
       [](TensorData&) { return false; }, 5, {"dsv4_ckpt_refuse", "missing tensor"}},
      {"wrong dtype (attn_sink F32 -> BF16)", "layers.4.attn.attn_sink",
       [](TensorData& t) { t.dtype = DType::BF16; t.bytes.resize(t.bytes.size() / 2); return true; },
       4, {kShard2, "dtype BF16, expected F32"}},
      {"wrong dtype of an FP8 scale (R6)", "layers.3.attn.wkv.scale",
       [](TensorData& t) { t.dtype = DType::U8; return true; }, 3, {kShard1, "dtype U8"}},
      {"wrong shape (q_norm [256] -> [128, 2])", "layers.1.attn.q_norm.weight",
       [](TensorData& t) { t.shape = {128, 2}; return true; }, 1, {kShard1, "shape [128, 2]"}},
      {"wrong expert dtype (R10)", "layers.5.ffn.experts.0.w1.weight",
       [](TensorData& t) { t.dtype = DType::F8_E4M3; return true; }, 5, {kShard2, "R10"}},
      {"mixed recipe inside a block (R10)", "layers.6.ffn.experts.3.w2.weight",
       [](TensorData& t) { t.dtype = DType::I8; return true; }, 6, {kShard2, "I8"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const fs::path dir = corrupt("refuse", c.tensor, c.edit);
    const std::string msg = error_text([&] {
      Checkpoint ck(dir.string());
      if (c.load_layer >= 0) ck.load_block(c.load_layer);
      if (c.load_layer == -2) ck.load_drafter();
    });
    CAPTURE(msg);
    CHECK(mentions(msg, c.tensor));
    for (const std::string& m : c.mention) CHECK(mentions(msg, m));
    fs::remove_all(dir);
  }
}

TEST_CASE("structural refusals: index vs headers (A2), strict census (A3/A6)") {
  SUBCASE("tensor in the index but not in its shard (A2)") {
    const fs::path dir = corrupt("a2", "layers.4.ffn_norm.weight",
                                 [](TensorData&) { return false; }, /*drop_from_index=*/false);
    Checkpoint ck(dir.string());
    CHECK(mentions(error_text([&] { ck.load_block(4); }), kShard2, "layers.4.ffn_norm.weight",
                   "A2"));
    fs::remove_all(dir);
  }
  SUBCASE("unknown tensor under layers. (A3)") {
    const std::string extra = "layers.0.attn.extra.weight";
    const fs::path dir = corrupt("a3", "layers.0.attn.attn_sink", [&](TensorData&) { return true; });
    std::vector<TensorData> t = read_shard(dir / kShard1);
    t.push_back(TensorData{extra, DType::F32, {2}, std::vector<uint8_t>(8, 0)});
    write_safetensors((dir / kShard1).string(), t);
    nlohmann::json index = read_json(dir / "model.safetensors.index.json");
    index["weight_map"][extra] = kShard1;
    write_json(dir / "model.safetensors.index.json", index);
    CHECK(mentions(error_text([&] { Checkpoint ck(dir.string()); }), kShard1, extra, "A3"));
    fs::remove_all(dir);
  }
  SUBCASE("a compressor tensor on an r = 0 layer (A6)") {
    const fs::path dir = scratch("a6");
    fs::copy(base_dir(), dir, fs::copy_options::recursive);
    nlohmann::json index = read_json(dir / "model.safetensors.index.json");
    index["weight_map"]["layers.1.attn.compressor.ape"] = kShard1;
    write_json(dir / "model.safetensors.index.json", index);
    CHECK(mentions(error_text([&] { Checkpoint ck(dir.string()); }),
                   "layers.1.attn.compressor.ape", "unexpected"));
    fs::remove_all(dir);
  }
  SUBCASE("drafter blocks must match dspark_target_layer_ids (R19)") {
    const fs::path dir = scratch("r19");
    fs::copy(base_dir(), dir, fs::copy_options::recursive);
    nlohmann::json cfg = read_json(dir / "config.json");
    cfg["dspark_target_layer_ids"] = {5, 6};
    write_json(dir / "config.json", cfg);
    CHECK(mentions(error_text([&] { Checkpoint ck(dir.string()); }), "3 DSpark blocks", "R19"));
    fs::remove_all(dir);
  }
  SUBCASE("n_mtp_layers, when present, must equal the mtp.* census (C9)") {
    const fs::path dir = scratch("c9");
    fs::copy(base_dir(), dir, fs::copy_options::recursive);
    fs::create_directories(dir / "inference");
    write_json(dir / "inference" / "config.json", nlohmann::json{{"n_mtp_layers", 3}});
    CHECK_NOTHROW(Checkpoint(dir.string()));
    write_json(dir / "inference" / "config.json", nlohmann::json{{"n_mtp_layers", 2}});
    CHECK(mentions(error_text([&] { Checkpoint ck(dir.string()); }), "inference/config.json",
                   "n_mtp_layers = 2", "3 mtp.* blocks"));
    fs::remove_all(dir);
  }
}

TEST_CASE("per-layer shard layout (§1.1, the Flash writer's): embed | layers | head | mtp.k") {
  const fs::path dir = scratch("per_layer");
  SyntheticOptions o;
  o.layout = ShardLayout::per_layer;
  write_synthetic_checkpoint(tiny_preset(), dir.string(), o);
  Checkpoint ck(dir.string());
  // 1 embed + 7 trunk layers + 1 head + 3 drafter blocks = 12 shards, 1-based names.
  CHECK(ck.shard_of("embed.weight") == "model-00001-of-00012.safetensors");
  CHECK(ck.shard_of("layers.0.attn.wq_a.weight") == "model-00002-of-00012.safetensors");
  CHECK(ck.shard_of("layers.6.ffn.gate.bias") == "model-00008-of-00012.safetensors");
  CHECK(ck.shard_of("norm.weight") == "model-00009-of-00012.safetensors");
  CHECK(ck.shard_of("mtp.0.main_norm.weight") == "model-00010-of-00012.safetensors");
  CHECK(ck.shard_of("mtp.2.norm.weight") == "model-00012-of-00012.safetensors");
  ck.load_block(3);
  CHECK(ck.shards_opened() == std::vector<std::string>{"model-00005-of-00012.safetensors"});
  // Same tensors, same bytes as the compact layout: the layout moves bytes, never values.
  Checkpoint compact(base_dir().string());
  for (const char* name : {"layers.3.ffn.experts.2.w1.weight", "mtp.1.attn.wq_b.scale", "head.weight"}) {
    const TensorView a = ck.tensor(name), b = compact.tensor(name);
    CHECK(std::vector<uint8_t>(a.data, a.data + a.nbytes) == std::vector<uint8_t>(b.data, b.data + b.nbytes));
  }
  fs::remove_all(dir);
}
