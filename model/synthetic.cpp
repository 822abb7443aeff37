// Synthetic checkpoint writer (CHECKPOINT.md §3.8 "Synthetic values", §6.1, §1.1).
#include "model/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "model/census.h"
#include "model/codecs.h"
#include "model/error.h"
#include "model/presets.h"
#include "model/safetensors.h"

namespace dsv4 {

namespace {

// Routed-expert gate/up (w1, w3) masters are drawn this many times wider than the plain
// ±sqrt(3/fan_in), so some gate/up pre-activations exceed ±swiglu_limit = 10 and the
// clamp is exercised (§6.2 swiglu_limit row): with a unit-RMS input a pre-activation is
// then about N(0, 3^2), i.e. ~1e-3 of them beyond ±10.
constexpr double kExpertGateUpAmplitude = 3.0;

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

// SplitMix64 seeded with FNV-1a-64(tensor name) xor the global seed (§3.8).
class TensorRng {
 public:
  TensorRng(const std::string& name, uint64_t seed) : state_(fnv1a64(name) ^ seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float uniform(double lo, double hi) { return static_cast<float>(lo + (hi - lo) * unit()); }

 private:
  uint64_t state_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Range { double lo, hi; };

// Master value range of a BF16/F32 island or an FP8/FP4 matrix (§3.8), by name.
Range master_range(const CensusEntry& e, int64_t fan_in) {
  const std::string& n = e.name;
  if (ends_with(n, "attn_sink")) return {-1.0, 1.0};
  if (ends_with(n, "gate.bias") || ends_with(n, ".ape")) return {-0.1, 0.1};
  if (ends_with(n, "_fn")) return {-0.02, 0.02};      // hc_{attn,ffn,head}_fn
  if (ends_with(n, "_base")) return {-0.1, 0.1};      // hc_*_base
  if (ends_with(n, "_scale")) return {0.5, 1.5};      // hc_*_scale (F32 islands only)
  if (ends_with(n, "norm.weight")) return {0.9, 1.1};
  double a = std::sqrt(3.0 / static_cast<double>(fan_in));  // projections
  if (e.cls == ByteClass::experts_packed &&
      (ends_with(n, ".w1.weight") || ends_with(n, ".w3.weight")))
    a *= kExpertGateUpAmplitude;
  return {-a, a};
}

std::vector<float> draw_master(const std::string& name, int64_t n, Range r, uint64_t seed) {
  TensorRng rng(name, seed);
  std::vector<float> m(static_cast<size_t>(n));
  for (float& v : m) v = rng.uniform(r.lo, r.hi);
  return m;
}

template <class T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {  // the hosts we build on are LE
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// tid2eid [V, K]: each row the first K of a Fisher-Yates shuffle of 0..E-1 (§3.8).
std::vector<uint8_t> synth_tid2eid(const CensusEntry& e, int64_t E, uint64_t seed) {
  TensorRng rng(e.name, seed);
  const int64_t V = e.shape.at(0), K = e.shape.at(1);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(V * K));
  std::vector<int64_t> perm(static_cast<size_t>(E));
  for (int64_t t = 0; t < V; ++t) {
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = E - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.unit() * static_cast<double>(i + 1));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
    out.insert(out.end(), perm.begin(), perm.begin() + K);
  }
  return le_bytes(out);
}

std::vector<uint8_t> synth_island(const CensusEntry& e, uint64_t seed) {
  const int64_t n = numel(e.shape);
  const int64_t fan_in = e.shape.empty() ? 1 : e.shape.back();
  const std::vector<float> m = draw_master(e.name, n, master_range(e, fan_in), seed);
  if (e.dtype == DType::F32) return le_bytes(m);
  DSV4_CHECK(e.dtype == DType::BF16, e.name);
  std::vector<uint16_t> b(m.size());
  for (size_t i = 0; i < m.size(); ++i) b[i] = f32_to_bf16(m[i]);
  return le_bytes(b);
}

bool is_quantized(const CensusEntry& e) {
  return ends_with(e.name, ".weight") &&
         (e.dtype == DType::F8_E4M3 || e.dtype == DType::I8 || e.dtype == DType::U8);
}

std::string stem_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

// Builds one shard's tensors from its census entries, one work item per quantized matrix
// (its scales come with it) or island, spread over worker threads. Each item depends
// only on its name and the seed, so the bytes do not depend on the thread count.
class ShardBuilder {
 public:
  ShardBuilder(const ModelConfig& c, uint64_t seed, const std::vector<const CensusEntry*>& es)
      : c_(c), seed_(seed) {
    for (const CensusEntry* e : es) by_name_[e->name] = e;
  }

  std::vector<TensorData> build(unsigned threads) {
    std::set<std::string> owned;  // scales produced with their matrix
    std::vector<const CensusEntry*> work;
    for (const auto& [name, e] : by_name_) {
      if (!is_quantized(*e)) continue;
      work.push_back(e);
      for (const char* sib : {".scale", ".weight_scale", ".weight_scale_2", ".input_scale"})
        owned.insert(stem_of(name) + sib);
    }
    for (const auto& [name, e] : by_name_)
      if (!is_quantized(*e) && !owned.count(name)) work.push_back(e);

    std::vector<std::vector<TensorData>> results(work.size());
    std::atomic<size_t> next{0};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto worker = [&] {
      for (size_t i; (i = next++) < work.size();) {
        try {
          results[i] = produce(*work[i]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::max(1u, threads); ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);

    std::vector<TensorData> out;
    for (auto& r : results)
      for (TensorData& t : r) {
        const auto it = by_name_.find(t.name);
        DSV4_CHECK(it != by_name_.end(), "produced a tensor outside the census: ", t.name);
        DSV4_CHECK(t.bytes.size() == it->second->bytes(), t.name, " ", t.bytes.size(), " vs ",
                   it->second->bytes());
        out.push_back(std::move(t));
      }
    DSV4_CHECK(out.size() == by_name_.size(), "every census entry written: ", out.size(), " of ",
               by_name_.size());
    return out;
  }

 private:
  TensorData tensor(const std::string& name, std::vector<uint8_t> bytes) const {
    const CensusEntry& e = *by_name_.at(name);
    return TensorData{e.name, e.dtype, e.shape, std::move(bytes)};
  }

  std::vector<TensorData> produce(const CensusEntry& e) const {
    if (e.dtype == DType::F8_E4M3 && is_quantized(e)) return fp8(e);
    if (is_quantized(e)) return fp4(e);
    if (e.dtype == DType::I64) return {tensor(e.name, synth_tid2eid(e, c_.n_routed_experts, seed_))};
    return {tensor(e.name, synth_island(e, seed_))};
  }

  // FP8 128x128 block-scaled linear (§3.8 rule 4).
  std::vector<TensorData> fp8(const CensusEntry& w) const {
    const int64_t rows = w.shape.at(0), cols = w.shape.at(1);
    std::vector<float> m = draw_master(w.name, rows * cols, master_range(w, cols), seed_);
    Fp8Encoded enc = encode_fp8_linear(m.data(), rows, cols);
    return {tensor(w.name, std::move(enc.codes)),
            tensor(stem_of(w.name) + ".scale", std::move(enc.scales))};
  }

  // Routed-expert projection, MXFP4 (rule 6) or NVFP4 (rule 7) by the stored dtype.
  std::vector<TensorData> fp4(const CensusEntry& w) const {
    const int64_t rows = w.shape.at(0), cols = 2 * w.shape.at(1);
    std::vector<float> m = draw_master(w.name, rows * cols, master_range(w, cols), seed_);
    const std::string stem = stem_of(w.name);
    std::vector<TensorData> out;
    if (w.dtype == DType::I8) {
      Fp4Encoded enc = encode_mxfp4(m.data(), rows, cols);
      out.push_back(tensor(w.name, std::move(enc.packed)));
      out.push_back(tensor(stem + ".scale", std::move(enc.scales)));
      return out;
    }
    Fp4Encoded enc = encode_nvfp4(m.data(), rows, cols);
    out.push_back(tensor(w.name, std::move(enc.packed)));
    out.push_back(tensor(stem + ".weight_scale", std::move(enc.scales)));
    out.push_back(tensor(stem + ".weight_scale_2", le_bytes(std::vector<float>{enc.scale_2})));
    if (by_name_.count(stem + ".input_scale"))  // rule 7: written as 1.0
      out.push_back(tensor(stem + ".input_scale", le_bytes(std::vector<float>{1.0f})));
    return out;
  }

  const ModelConfig& c_;
  uint64_t seed_;
  std::map<std::string, const CensusEntry*> by_name_;
};

// Shard index of a census entry. Units: 0 embed | 1..L trunk layers | L+1 head group |
// L+2+k drafter block k; the layout groups consecutive units into shards.
int shard_of(const CensusEntry& e, int L, int n_blk, ShardLayout layout) {
  int unit;
  if (e.layer_id < 0) unit = e.cls == ByteClass::embed ? 0 : L + 1;
  else if (e.layer_id < L) unit = 1 + e.layer_id;
  else unit = L + 2 + (e.layer_id - L);
  if (layout == ShardLayout::per_layer) return unit;
  const int first_half = (L + 1) / 2;  // §6.1: layers 0-3 of 7 in shard 1
  if (unit <= first_half) return 0;
  if (unit <= L + 1) return 1;
  return n_blk > 0 ? 2 : 1;
}

std::string shard_file_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw Error(cat("cannot write ", p.string()));
}

}  // namespace

void write_synthetic_checkpoint(const ModelConfig& c, const std::string& dir,
                                const SyntheticOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(cat("cannot create checkpoint directory ", dir, ": ", ec.message()));

  CensusOptions co;
  co.trunk_experts = o.trunk_experts;
  co.drafter_experts = o.drafter_experts;
  co.drafter_blocks = o.drafter_blocks;
  const std::vector<CensusEntry> census = tensor_census(c, co);
  const int L = c.num_hidden_layers, n_blk = census_drafter_blocks(c, co);

  std::vector<std::vector<const CensusEntry*>> shards;
  for (const CensusEntry& e : census) {
    const int s = shard_of(e, L, n_blk, o.layout);
    if (s >= static_cast<int>(shards.size())) shards.resize(static_cast<size_t>(s) + 1);
    shards[static_cast<size_t>(s)].push_back(&e);
  }
  const int n_shards = static_cast<int>(shards.size());
  const unsigned threads =
      o.threads > 0 ? static_cast<unsigned>(o.threads) : std::max(1u, std::thread::hardware_concurrency());

  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (int s = 0; s < n_shards; ++s) {
    const std::string file = shard_file_name(s, n_shards);
    uint64_t shard_bytes = 0;
    for (const CensusEntry* e : shards[static_cast<size_t>(s)]) {
      weight_map[e->name] = file;
      shard_bytes += e->bytes();
    }
    std::vector<TensorData> tensors =
        ShardBuilder(c, o.seed, shards[static_cast<size_t>(s)]).build(threads);
    write_safetensors((fs::path(dir) / file).string(), tensors);
    total += shard_bytes;
    if (o.progress)
      o.progress(cat("wrote ", file, ": ", tensors.size(), " tensors, ", shard_bytes, " B (",
                     s + 1, "/", n_shards, ")"));
  }

  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = weight_map;
  write_text(fs::path(dir) / "model.safetensors.index.json", index.dump(2) + "\n");
  write_text(fs::path(dir) / "config.json", model_config_json(c));
}

}  // namespace dsv4
