// Synthetic checkpoint writer (CHECKPOINT.md §3.8 "Synthetic values", §6.1, §1.1).
#include "model/synthetic.h"
#include "model/pre_tokenizer.h"
#include "model/tiny_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/census.h"
#include "base/error.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/synthetic_host.h"
#include "model/synthetic_plan.h"

namespace dsv4 {

namespace {

// Builds one shard's tensors from their recipes, one work item per tensor, spread over
// worker threads. Each tensor depends only on its recipe, so the bytes do not depend on
// the thread count.
std::vector<TensorData> build_shard(const std::vector<const SynthTensor*>& recipes, unsigned threads) {
  std::vector<TensorData> out(recipes.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (size_t i; (i = next++) < recipes.size();) {
      try {
        const SynthTensor& t = *recipes[i];
        out[i] = TensorData{t.name, t.dtype, t.shape, synth_generate_host(t)};
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
  return out;
}

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

  const std::vector<SynthTensor> plan = synth_plan(census, c.n_routed_experts, o.seed);
  std::vector<std::vector<const SynthTensor*>> shards;
  for (size_t i = 0; i < census.size(); ++i) {
    const int s = shard_of(census[i], L, n_blk, o.layout);
    if (s >= static_cast<int>(shards.size())) shards.resize(static_cast<size_t>(s) + 1);
    shards[static_cast<size_t>(s)].push_back(&plan[i]);
  }
  const int n_shards = static_cast<int>(shards.size());
  const unsigned threads =
      o.threads > 0 ? static_cast<unsigned>(o.threads) : std::max(1u, std::thread::hardware_concurrency());

  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (int s = 0; s < n_shards; ++s) {
    const std::string file = shard_file_name(s, n_shards);
    uint64_t shard_bytes = 0;
    for (const SynthTensor* t : shards[static_cast<size_t>(s)]) {
      weight_map[t->name] = file;
      shard_bytes += t->bytes();
    }
    std::vector<TensorData> tensors = build_shard(shards[static_cast<size_t>(s)], threads);
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
  if (o.tokenizer && !pre_tokenizer_available() && o.progress)
    o.progress("no tokenizer written: this build has no ICU (the tiny tokenizer's merges are "
               "learned with the pre-tokenizer); token-id runs are unaffected");
  if (o.tokenizer && pre_tokenizer_available()) {
    write_text(fs::path(dir) / "tokenizer.json", tiny_tokenizer_json(c).dump() + "\n");
    write_text(fs::path(dir) / "tokenizer_config.json", tiny_tokenizer_config_json(c).dump(2) + "\n");
  }
}

}  // namespace dsv4
