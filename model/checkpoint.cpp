// Checkpoint directory reader and typed loaders with the load-time refusals of
// CHECKPOINT.md §4 (R1, R3-R7, R9-R15, R17-R21, A2-A6) and decisions C1, C3, C4, C7, C9, C12.
#include "model/checkpoint.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "model/census.h"
#include "model/codecs.h"
#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// C12: the small tensors the release stores as BF16 may also be stored as F32.
bool f32_accepted(const std::string& name) {
  return ends_with(name, "norm.weight") || name.find(".compressor.wkv.") != std::string::npos ||
         name.find(".compressor.wgate.") != std::string::npos ||
         ends_with(name, "ffn.gate.weight") || ends_with(name, "weights_proj.weight");
}

// k of a name "mtp.{k}.*", or -1 when the name is not of that form.
int mtp_index(const std::string& name) {
  if (!starts_with(name, "mtp.")) return -1;
  size_t i = 4, j = i;
  while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
  if (j == i || j >= name.size() || name[j] != '.' || j - i > 6) return -1;
  return std::stoi(name.substr(i, j - i));
}

// "layers.l." (trunk) or "mtp.k." (drafter block) for a layer id.
std::string block_prefix(const ModelConfig& c, int layer_id) {
  return layer_id < c.num_hidden_layers ? cat("layers.", layer_id, ".")
                                        : cat("mtp.", layer_id - c.num_hidden_layers, ".");
}

// The value checks of a stored tensor, by dtype, wherever its bytes live:
// R21 (no NaN/Inf in F32/BF16), R7 + A5 (no E8M0 0xFF / 0x00), A4 (no E4M3 NaN codes;
// NVFP4 block scales without the sign bit).
void check_values(const WeightMemory* memory, const TensorView& v, const std::string& where) {
  const bool block_scale = ends_with(v.name, ".weight_scale");
  const FaultAt f = v.on_device ? memory->first_fault(v, block_scale)
                                : first_fault_host(v.dtype, v.data, v.nbytes, block_scale);
  const int64_t i = f.element;
  switch (f.fault) {
    case ValueFault::none: return;
    case ValueFault::non_finite: {
      const size_t width = dtype_size(v.dtype);
      uint8_t raw[4] = {0, 0, 0, 0};
      if (v.on_device) memory->read(v, static_cast<size_t>(i) * width, width, raw);
      else std::memcpy(raw, v.data + static_cast<size_t>(i) * width, width);
      uint16_t b;
      float x;
      if (width == 2) std::memcpy(&b, raw, 2), x = bf16_to_f32(b);
      else std::memcpy(&x, raw, 4);
      throw Error(cat(where, ": element ", i, " is ", x, " (NaN/Inf refused, R21)"));
    }
    case ValueFault::e8m0_nan: throw Error(cat(where, ": E8M0 scale code 0xFF (NaN) at element ", i, " (R7)"));
    case ValueFault::e8m0_zero: throw Error(cat(where, ": E8M0 scale code 0x00 (2^-127) at element ", i, " (A5)"));
    case ValueFault::e4m3_nan: throw Error(cat(where, ": E4M3 NaN code at element ", i, " (A4)"));
    case ValueFault::block_scale_sign:
      throw Error(cat(where, ": NVFP4 block scale with the sign bit set at element ", i, " (A4)"));
  }
}

// The census entries of one block (or the globals) by name, fetched with full
// dtype/shape/value checks (R1, R3, R5, R6, R9, R11, R13, R18, R21, A4, A5, C12).
class Fetcher {
 public:
  Fetcher(Checkpoint& ck, std::vector<CensusEntry> entries, std::string prefix, std::string what)
      : ck_(ck), prefix_(std::move(prefix)), what_(std::move(what)) {
    for (CensusEntry& e : entries) entries_.emplace(e.name, std::move(e));
  }

  TensorView get(const std::string& stem) { return fetch(entry(stem)); }
  Fp8Linear fp8(const std::string& stem) {
    Fp8Linear w{get(stem + ".weight"), get(stem + ".scale")};
    if (w.in() % 8 != 0)  // R4: the fp8 GEMV reads 8-byte chunks (A6 makes this hold)
      throw Error(cat(where(w.weight.name), ": FP8 columns ", w.in(), " not a multiple of 8 (R4)"));
    return w;
  }
  std::string where(const std::string& name) const {
    return cat(ck_.dir(), "/", ck_.shard_of(name), ": tensor ", name);
  }
  const CensusEntry& entry(const std::string& stem) const {
    const auto it = entries_.find(prefix_ + stem);
    DSV4_CHECK(it != entries_.end(), "census has no ", prefix_, stem);
    return it->second;
  }
  const std::unordered_map<std::string, CensusEntry>& entries() const { return entries_; }
  const std::string& what() const { return what_; }

 private:
  TensorView fetch(const CensusEntry& e) {
    if (!ck_.has(e.name))
      throw Error(cat(ck_.dir(), ": missing tensor ", e.name, " of ", what_,
                      " (not in the checkpoint's weight map, R1)"));
    TensorView v = ck_.tensor(e.name);
    const bool dtype_ok =
        v.dtype == e.dtype ||
        (e.dtype == DType::BF16 && v.dtype == DType::F32 && f32_accepted(e.name)) ||
        (e.dtype == DType::I64 && v.dtype == DType::I32);  // tid2eid, C7
    if (!dtype_ok)
      throw Error(cat(where(e.name), ": dtype ", dtype_name(v.dtype), ", expected ",
                      dtype_name(e.dtype), " (", what_, ")"));
    if (v.shape != e.shape)
      throw Error(cat(where(e.name), ": shape ", shape_str(v.shape), ", expected ",
                      shape_str(e.shape), " (", what_, ")"));
    check_values(ck_.weight_memory(), v, where(e.name));
    return v;
  }

  Checkpoint& ck_;
  std::string prefix_, what_;
  std::unordered_map<std::string, CensusEntry> entries_;
};

// R14 / C7: tid2eid [V, K], I64 or I32, ids in [0, E), distinct within a row; held as i32.
std::vector<int32_t> decode_tid2eid(const TensorView& v, const std::vector<uint8_t>& bytes,
                                    int64_t E, const std::string& where) {
  const int64_t V = v.dim(0), K = v.dim(1);
  const size_t width = dtype_size(v.dtype);
  std::vector<int32_t> out(static_cast<size_t>(V * K));
  std::vector<int64_t> row(static_cast<size_t>(K));
  for (int64_t t = 0; t < V; ++t) {
    for (int64_t j = 0; j < K; ++j) {
      const uint8_t* p = bytes.data() + static_cast<size_t>(t * K + j) * width;
      int64_t id;
      if (width == 8) {
        std::memcpy(&id, p, 8);
      } else {
        int32_t id32;
        std::memcpy(&id32, p, 4);
        id = id32;
      }
      if (id < 0 || id >= E)
        throw Error(cat(where, ": row ", t, " holds expert id ", id, " outside [0, ", E,
                        ") (R14)"));
      for (int64_t i = 0; i < j; ++i)
        if (row[static_cast<size_t>(i)] == id)
          throw Error(cat(where, ": row ", t, " repeats expert id ", id, " (R14)"));
      row[static_cast<size_t>(j)] = id;
      out[static_cast<size_t>(t * K + j)] = static_cast<int32_t>(id);
    }
  }
  return out;
}

HeadWeights head_fields(Fetcher& f) {
  return HeadWeights{f.get("norm.weight"), f.get("hc_head_fn"), f.get("hc_head_base"),
                     f.get("hc_head_scale")};
}

CompressorWeights compressor_fields(Fetcher& f, const std::string& stem, int ratio, int d,
                                    bool rotate) {
  CompressorWeights w;
  w.ratio = ratio;
  w.overlap = ratio == 4;
  w.rotate = rotate;
  w.d = d;
  w.wkv = f.get(stem + ".wkv.weight");
  w.wgate = f.get(stem + ".wgate.weight");
  w.ape = f.get(stem + ".ape");
  w.norm = f.get(stem + ".norm.weight");
  return w;
}

HcParams hc_fields(Fetcher& f, const std::string& site) {
  return HcParams{f.get(site + "_fn"), f.get(site + "_base"), f.get(site + "_scale")};
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw Error(cat(dir, ": not a checkpoint directory"));
  config_ = load_model_config((root / "config.json").string());

  const fs::path index_path = root / kIndexFile;
  if (fs::exists(index_path)) {
    const nlohmann::json index = load_json_strict(index_path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
      throw Error(cat(index_path.string(), ": no weight_map object"));
    for (const auto& [name, file] : index.at("weight_map").items()) {
      if (!file.is_string())
        throw Error(cat(index_path.string(), ": weight_map entry ", name, " is not a file name"));
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        throw Error(cat(index_path.string(), ": weight_map entry ", name, " names shard '", f,
                        "', not a plain file name in the directory"));
      weight_map_[name] = f;
    }
    if (index.contains("metadata") && index.at("metadata").is_object() &&
        index.at("metadata").contains("total_size")) {
      const nlohmann::json& t = index.at("metadata").at("total_size");
      uint64_t total = 0;
      const std::string text = t.is_string() ? t.get<std::string>() : std::string();
      const auto parsed = std::from_chars(text.data(), text.data() + text.size(), total);
      if (t.is_number_unsigned()) {
        index_total_size_ = t.get<uint64_t>();
      } else if (t.is_string() && !text.empty() && parsed.ec == std::errc() &&
                 parsed.ptr == text.data() + text.size()) {
        index_total_size_ = total;
      } else {
        throw Error(cat(index_path.string(), ": metadata.total_size is ", t.dump(),
                        ", not an integer or a decimal string"));
      }
    }
  } else if (fs::exists(root / kSingleFile)) {
    for (const SafetensorsEntry& e : shard(kSingleFile).entries()) weight_map_[e.name] = kSingleFile;
  } else {
    throw Error(cat(dir, ": neither ", kIndexFile, " nor ", kSingleFile, " exists"));
  }
  check_names();
}

Checkpoint::Checkpoint(const ModelConfig& config, const SyntheticOptions& o)
    : dir_(cat("synthetic weights (", config.source, ", seed ", o.seed, ")")),
      config_(config),
      synthetic_(true),
      share_layers_(o.share_layers_by_kind) {
  CensusOptions co;
  co.trunk_experts = o.trunk_experts;
  co.drafter_experts = o.drafter_experts;
  const std::vector<CensusEntry> census = tensor_census(config_, co);
  for (SynthTensor& t : synth_plan(census, config_.n_routed_experts, o.seed)) {
    weight_map_[t.name] = "generated";
    std::string name = t.name;
    recipes_.emplace(std::move(name), std::move(t));
  }
  check_names();
}

// What the names say about the drafter and the census, for either source (§1.3, C9, A3, A6).
void Checkpoint::check_names() {
  const std::string& dir = dir_;
  const fs::path root(dir_);
  // Drafter kind (§1.3) and block count (C9, S7): distinct mtp.{k} prefixes, 0..N-1.
  std::set<int> mtp_blocks;
  for (const auto& [name, file] : weight_map_) {
    const int k = mtp_index(name);
    if (k >= 0) mtp_blocks.insert(k);
  }
  drafter_blocks_ = static_cast<int>(mtp_blocks.size());
  if (!mtp_blocks.empty() && *mtp_blocks.rbegin() != drafter_blocks_ - 1)
    throw Error(cat(dir, ": drafter blocks are not mtp.0 .. mtp.N-1 (found ", drafter_blocks_,
                    " prefixes, the largest mtp.", *mtp_blocks.rbegin(), ")"));
  if (has("mtp.0.e_proj.weight")) drafter_kind_ = DrafterKind::nextn;
  else if (config_.dspark.present && has("mtp.0.main_proj.weight")) drafter_kind_ = DrafterKind::dspark;
  if (drafter_kind_ == DrafterKind::none && drafter_blocks_ > 0)
    throw Error(cat(dir, ": mtp.* tensors present but neither a DSpark drafter (dspark_* keys in ",
                    config_.source, " and mtp.0.main_proj.weight) nor NextN (mtp.0.e_proj.weight)"));
  if (drafter_kind_ == DrafterKind::dspark &&
      drafter_blocks_ != static_cast<int>(config_.dspark.target_layer_ids.size()))
    throw Error(cat(dir, ": ", drafter_blocks_, " DSpark blocks mtp.* but ",
                    config_.dspark.target_layer_ids.size(),
                    " dspark_target_layer_ids in ", config_.source, " (R19: N_blk = T)"));
  if (drafter_kind_ == DrafterKind::nextn) {
    if (config_.dspark.present)
      throw Error(cat(dir, ": mtp.0.e_proj.weight (NextN) with dspark_* keys in ", config_.source));
    if (drafter_blocks_ != 1 || config_.num_nextn_predict_layers != 1)
      throw Error(cat(dir, ": NextN needs exactly one block mtp.0 and num_nextn_predict_layers "
                      "= 1 (found ", drafter_blocks_, " blocks, R16)"));
  }
  // C9 / S7: n_mtp_layers, where a config states it (top level or the reference dialect's
  // inference/config.json), must equal the census count.
  for (const fs::path& p : {root / "config.json", root / "inference" / "config.json"}) {
    if (!fs::exists(p)) continue;
    std::ifstream in(p);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("n_mtp_layers") &&
        !(j["n_mtp_layers"].is_number_integer() && j["n_mtp_layers"].get<int64_t>() == drafter_blocks_))
      throw Error(cat(p.string(), ": n_mtp_layers = ", j["n_mtp_layers"].dump(), " but the checkpoint has ",
                      drafter_blocks_, " mtp.* blocks (C9)"));
  }
  const int L = config_.num_hidden_layers;
  if (config_.compress_ratios.size() < static_cast<size_t>(L + drafter_blocks_))
    throw Error(cat(config_.source, ": compress_ratios has ", config_.compress_ratios.size(),
                    " entries, the checkpoint needs L + N_blk = ", L + drafter_blocks_, " (A6)"));
  for (int k = 0; k < drafter_blocks_; ++k)
    if (config_.ratio(L + k) != 0)
      throw Error(cat(config_.source, ": compress_ratios[", L + k, "] = ", config_.ratio(L + k),
                      ", drafter block mtp.", k, " must be 0 (R17)"));

  // A3 / A6 strict census over names: every tensor under layers. / mtp. must be one of
  // its block's census names for either expert recipe (input_scale allowed, C3).
  std::unordered_set<std::string> known;
  CensusOptions co;
  co.drafter_blocks = drafter_blocks_;
  for (int l = 0; l < L + drafter_blocks_; ++l)
    for (ExpertRecipe r : {ExpertRecipe::mxfp4, ExpertRecipe::nvfp4}) {
      co.trunk_experts = co.drafter_experts = r;
      for (const CensusEntry& e : block_census(config_, co, l)) known.insert(e.name);
    }
  for (const auto& [name, file] : weight_map_)
    if ((starts_with(name, "layers.") || starts_with(name, "mtp.")) && !known.count(name))
      throw Error(cat(dir, "/", file, ": unexpected tensor ", name,
                      " (not in the census of this config; A3/A6)"));
}

DrafterKind Checkpoint::drafter_kind() const { return drafter_kind_; }
int Checkpoint::drafter_blocks() const { return drafter_blocks_; }

bool Checkpoint::has(const std::string& name) const { return weight_map_.count(name) != 0; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(weight_map_.size());
  for (const auto& [name, file] : weight_map_) out.push_back(name);
  return out;
}

std::string Checkpoint::shard_of(const std::string& name) const {
  const auto it = weight_map_.find(name);
  if (it == weight_map_.end())
    throw Error(cat(dir_, ": missing tensor ", name, " (not in the weight map, R1)"));
  return it->second;
}

TensorView Checkpoint::tensor(const std::string& name) {
  TensorView v = synthetic_ ? generated(name) : shard(shard_of(name)).view(name);
  bytes_loaded_ += v.nbytes;
  return v;
}

DType Checkpoint::stored_dtype(const std::string& name) {
  if (!synthetic_) return shard(shard_of(name)).view(name).dtype;
  const auto it = recipes_.find(name);
  if (it == recipes_.end()) throw Error(cat(dir_, ": missing tensor ", name, " (R1)"));
  return it->second.dtype;
}

std::vector<uint8_t> Checkpoint::host_copy(const TensorView& v) const {
  std::vector<uint8_t> out(v.nbytes);
  if (v.on_device) memory_->read(v, 0, v.nbytes, out.data());
  else if (v.nbytes > 0) std::memcpy(out.data(), v.data, v.nbytes);
  return out;
}

// The canonical layer of a trunk layer when layers of one kind share weights: the first
// layer with the same compress ratio and routing (benchmark mode, SyntheticOptions).
int Checkpoint::shared_layer(int l) const {
  for (int k = 0; k < l; ++k)
    if (config_.ratio(k) == config_.ratio(l) && config_.is_hash(k) == config_.is_hash(l)) return k;
  return l;
}

TensorView Checkpoint::generated(const std::string& name) {
  auto it = generated_.find(name);
  if (it != generated_.end()) return it->second;
  const auto r = recipes_.find(name);
  if (r == recipes_.end()) throw Error(cat(dir_, ": missing tensor ", name, " (R1)"));
  if (!memory_)
    throw Error(cat(dir_, ": tensor ", name, " asked for before the weight memory was attached"));
  TensorView v;
  const int L = config_.num_hidden_layers;
  int l = -1;
  if (share_layers_ && std::sscanf(name.c_str(), "layers.%d.", &l) == 1 && l < L && shared_layer(l) != l) {
    const std::string prefix = cat("layers.", l, ".");
    v = generated(cat("layers.", shared_layer(l), ".", name.substr(prefix.size())));
    v.name = name;
  } else {
    v = memory_->generate(r->second);
  }
  generated_.emplace(name, v);
  return v;
}

void Checkpoint::attach_weight_memory(std::unique_ptr<WeightMemory> memory) {
  if (!synthetic_) throw Error(cat(dir_, ": a file checkpoint has no weight memory to attach"));
  memory_ = std::move(memory);
}

std::vector<std::string> Checkpoint::shards_opened() const {
  std::vector<std::string> out;
  for (const auto& [file, st] : shards_) out.push_back(file);
  return out;
}

SafetensorsFile& Checkpoint::shard(const std::string& file) {
  auto it = shards_.find(file);
  if (it != shards_.end()) return *it->second;
  const std::string path = (fs::path(dir_) / file).string();
  auto st = std::make_unique<SafetensorsFile>(path);
  // A2: the header and the weight map agree on this shard, both ways.
  if (!weight_map_.empty()) {
    for (const SafetensorsEntry& e : st->entries()) {
      const auto w = weight_map_.find(e.name);
      if (w == weight_map_.end())
        throw Error(cat(path, ": tensor ", e.name, " is not in ", kIndexFile, " (A2)"));
      if (w->second != file)
        throw Error(cat(path, ": tensor ", e.name, " is mapped to ", w->second, " by ",
                        kIndexFile, " (A2)"));
    }
    for (const auto& [name, f] : weight_map_)
      if (f == file && !st->contains(name))
        throw Error(cat(path, ": tensor ", name, " listed by ", kIndexFile,
                        " is not in this shard (A2)"));
  }
  SafetensorsFile& ref = *st;
  shards_.emplace(file, std::move(st));

  // total_size (§1.4) is checked once every shard is open; a mismatch only warns (A2).
  if (index_total_size_) {
    std::set<std::string> files;
    for (const auto& [name, f] : weight_map_) files.insert(f);
    if (files.size() == shards_.size()) {
      uint64_t sum = 0;
      for (const auto& [f, s] : shards_) sum += s->data_bytes();
      if (sum != *index_total_size_)
        std::cerr << "warning: " << dir_ << "/" << kIndexFile << ": metadata.total_size "
                  << *index_total_size_ << " differs from the shards' tensor bytes " << sum
                  << "\n";
    }
  }
  return ref;
}

BlockWeights Checkpoint::load_block(int layer_id) {
  const ModelConfig& c = config_;
  const int L = c.num_hidden_layers;
  if (layer_id < 0 || layer_id >= L + drafter_blocks_)
    throw Error(cat(dir_, ": layer id ", layer_id, " outside the checkpoint's [0, ",
                    L + drafter_blocks_, ") (", L, " trunk layers, ", drafter_blocks_,
                    " drafter blocks)"));
  const std::string prefix = block_prefix(c, layer_id);
  // R10 / C1: the recipe from the stored dtype of experts.0.w1.weight (peeked at without
  // counting it as loaded; the Fetcher below checks and hands it out).
  const std::string probe = prefix + "ffn.experts.0.w1.weight";
  const DType probe_dtype = stored_dtype(probe);
  const std::optional<ExpertRecipe> stored = expert_recipe_of_packed_dtype(dtype_name(probe_dtype));
  if (!stored)
    throw Error(cat(dir_, "/", shard_of(probe), ": tensor ", probe, ": dtype ",
                    dtype_name(probe_dtype), " is neither U8 (NVFP4) nor I8 (MXFP4) (R10)"));
  const ExpertRecipe recipe = *stored;
  CensusOptions co;
  co.trunk_experts = co.drafter_experts = recipe;
  co.drafter_blocks = drafter_blocks_;
  const int r = c.ratio(layer_id);
  const bool hash = layer_id < L && c.is_hash(layer_id);
  Fetcher f(*this, block_census(c, co, layer_id), prefix,
            cat("block ", prefix.substr(0, prefix.size() - 1), " (ratio ", r,
                hash ? ", hash-routed" : ", score-routed", ", ",
                expert_format(recipe).name, " experts)"));

  // R10: every tensor of the block belongs to its census for the detected recipe (one
  // recipe per block, the exact sibling set); input_scale is ignored (C3).
  for (auto it = weight_map_.lower_bound(prefix);
       it != weight_map_.end() && starts_with(it->first, prefix); ++it)
    if (!f.entries().count(it->first))
      throw Error(cat(dir_, "/", it->second, ": unexpected tensor ", it->first, " in ",
                      f.what(), " (R10/A3)"));

  BlockWeights b;
  b.layer_id = layer_id;
  b.ratio = r;
  b.hash = hash;
  b.hc_attn = hc_fields(f, "hc_attn");
  b.hc_ffn = hc_fields(f, "hc_ffn");
  b.attn_norm = f.get("attn_norm.weight");
  b.ffn_norm = f.get("ffn_norm.weight");
  b.wq_a = f.fp8("attn.wq_a");
  b.wq_b = f.fp8("attn.wq_b");
  b.wkv = f.fp8("attn.wkv");
  b.wo_a = f.fp8("attn.wo_a");
  b.wo_b = f.fp8("attn.wo_b");
  b.q_norm = f.get("attn.q_norm.weight");
  b.kv_norm = f.get("attn.kv_norm.weight");
  b.attn_sink = f.get("attn.attn_sink");
  if (r > 0) b.compressor = compressor_fields(f, "attn.compressor", r, c.head_dim, false);
  if (r == 4) {
    IndexerWeights ix;
    ix.wq_b = f.fp8("attn.indexer.wq_b");
    ix.weights_proj = f.get("attn.indexer.weights_proj.weight");
    ix.compressor = compressor_fields(f, "attn.indexer.compressor", 4, c.index_head_dim, true);
    b.indexer = std::move(ix);
  }
  b.gate_weight = f.get("ffn.gate.weight");
  if (hash) {
    const TensorView t = f.get("ffn.gate.tid2eid");
    b.tid2eid = decode_tid2eid(t, host_copy(t), c.n_routed_experts, f.where(t.name));
  } else {
    b.gate_bias = f.get("ffn.gate.bias");  // R15
  }
  b.shared_w1 = f.fp8("ffn.shared_experts.w1");
  b.shared_w2 = f.fp8("ffn.shared_experts.w2");
  b.shared_w3 = f.fp8("ffn.shared_experts.w3");

  b.expert_recipe = recipe;
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  b.experts.resize(static_cast<size_t>(c.n_routed_experts));
  for (int e = 0; e < c.n_routed_experts; ++e) {
    auto projection = [&](const char* p, int64_t rows, int64_t cols) {
      const std::string stem = cat("ffn.experts.", e, ".", p);
      Fp4Linear w;
      w.recipe = recipe;
      w.rows = rows;
      w.cols = cols;
      w.weight = f.get(stem + ".weight");
      if (recipe == ExpertRecipe::mxfp4) {
        w.scale = f.get(stem + ".scale");  // R13
        return w;
      }
      w.scale = f.get(stem + ".weight_scale");
      const TensorView s2 = f.get(stem + ".weight_scale_2");
      std::memcpy(&w.scale_2, host_copy(s2).data(), 4);
      if (!(std::isfinite(w.scale_2) && w.scale_2 > 0.0f))  // R12 / C4
        throw Error(cat(f.where(s2.name), ": weight_scale_2 = ", w.scale_2,
                        " must be finite and > 0 (R12, C4)"));
      return w;
    };
    ExpertWeights& x = b.experts[static_cast<size_t>(e)];
    x.w1 = projection("w1", I, H);
    x.w2 = projection("w2", H, I);
    x.w3 = projection("w3", I, H);
  }
  return b;
}

TensorView Checkpoint::load_embed() {
  Fetcher f(*this, global_census(config_), "", "globals");
  return f.get("embed.weight");
}

TensorView Checkpoint::load_head_matrix() {
  Fetcher f(*this, global_census(config_), "", "globals");
  return f.get("head.weight");
}

HeadWeights Checkpoint::load_head() {
  Fetcher f(*this, global_census(config_), "", "globals");
  return head_fields(f);
}

DrafterWeights Checkpoint::load_drafter() {
  if (drafter_kind_ != DrafterKind::dspark)
    throw Error(cat(dir_, ": no DSpark drafter to load (",
                    drafter_kind_ == DrafterKind::nextn ? "the mtp.0 block is NextN"
                                                        : "no mtp.* tensors",
                    "; SPECDECODE §2.1)"));
  const int L = config_.num_hidden_layers, last = drafter_blocks_ - 1;
  DrafterWeights d;
  for (int k = 0; k < drafter_blocks_; ++k) d.blocks.push_back(load_block(L + k));

  // Extras (§2.7): the census entries of mtp.0 and mtp.last (their experts are not read).
  CensusOptions co;
  co.drafter_blocks = drafter_blocks_;
  co.drafter_experts = d.blocks.front().expert_recipe;
  Fetcher first(*this, block_census(config_, co, L), "mtp.0.", "DSpark drafter mtp.0");
  d.main_proj = first.fp8("main_proj");
  d.main_norm = first.get("main_norm.weight");
  co.drafter_experts = d.blocks.back().expert_recipe;
  Fetcher tail(*this, block_census(config_, co, L + last), cat("mtp.", last, "."),
               cat("DSpark drafter mtp.", last));
  d.exit = head_fields(tail);
  d.markov_w1 = tail.get("markov_head.markov_w1.weight");
  d.markov_w2 = tail.get("markov_head.markov_w2.weight");
  d.confidence = tail.get("confidence_head.proj.weight");
  return d;
}

}  // namespace dsv4
