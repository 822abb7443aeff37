// dsv4-mkckpt: writes a deterministic synthetic checkpoint (CHECKPOINT.md §3.8, §6.1) or
// prints the resident byte census of a preset (§5.1, §5.2).
#include <array>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "model/census.h"
#include "base/error.h"
#include "launcher/tool_args.h"
#include "model/presets.h"
#include "model/synthetic.h"

namespace {

using dsv4::ByteClass;
using dsv4::ExpertRecipe;

// 166878536440 -> "166,878,536,440" (as the spec prints byte counts).
std::string grouped(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string gib(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(v) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

const char* recipe_name(ExpertRecipe r) { return r == ExpertRecipe::nvfp4 ? "nvfp4" : "mxfp4"; }

// Bytes by class (rows) and part (trunk / globals / drafter), §5.1-§5.2.
void print_census(const dsv4::ModelConfig& c, const dsv4::CensusOptions& o) {
  const std::vector<dsv4::CensusEntry> census = dsv4::tensor_census(c, o);
  const int L = c.num_hidden_layers, n_blk = dsv4::census_drafter_blocks(c, o);
  enum Part { kTrunk, kGlobals, kDrafter, kParts };
  std::map<ByteClass, std::array<uint64_t, kParts>> by_class;
  std::array<uint64_t, kParts> part_total{};
  for (const auto& e : census) {
    const Part p = e.layer_id < 0 ? kGlobals : (e.layer_id < L ? kTrunk : kDrafter);
    by_class[e.cls][p] += e.bytes();
    part_total[p] += e.bytes();
  }
  const uint64_t total = part_total[kTrunk] + part_total[kGlobals] + part_total[kDrafter];
  std::printf("census of %s: trunk experts %s, drafter experts %s, %d trunk layers, "
              "%d drafter blocks\n", c.source.c_str(), recipe_name(o.trunk_experts),
              recipe_name(o.drafter_experts), L, n_blk);
  std::printf("%-16s %22s %22s %22s %22s\n", "class", "trunk", "globals", "drafter", "all");
  for (const auto& [cls, v] : by_class)
    std::printf("%-16s %22s %22s %22s %22s\n", dsv4::byte_class_name(cls), grouped(v[kTrunk]).c_str(),
                grouped(v[kGlobals]).c_str(), grouped(v[kDrafter]).c_str(),
                grouped(v[kTrunk] + v[kGlobals] + v[kDrafter]).c_str());
  std::printf("%-16s %22s %22s %22s %22s\n", "total", grouped(part_total[kTrunk]).c_str(),
              grouped(part_total[kGlobals]).c_str(), grouped(part_total[kDrafter]).c_str(),
              grouped(total).c_str());
  std::printf("%-16s %22s %22s %22s %22s\n", "GiB", gib(part_total[kTrunk]).c_str(),
              gib(part_total[kGlobals]).c_str(), gib(part_total[kDrafter]).c_str(), gib(total).c_str());
  std::printf("per block (resident bytes):\n");
  for (int l = 0; l < L + n_blk; ++l)
    std::printf("  %s %-3d r %-4d %s%22s\n", l < L ? "layer" : "mtp  ", l < L ? l : l - L,
                c.ratio(l), l < L && c.is_hash(l) ? "hash " : "score",
                grouped(dsv4::layer_bytes(census, l)).c_str());
  std::printf("tensors: %zu\ntotal bytes: %s (%s GiB)\n", census.size(), grouped(total).c_str(),
              gib(total).c_str());
}

int run(int argc, char** argv) {
  cxxopts::Options opts("dsv4-mkckpt",
                        "Writes a deterministic synthetic DeepSeek-V4 checkpoint (config.json, "
                        "model.safetensors.index.json, model-*.safetensors; the tiny preset also "
                        "tokenizer.json and tokenizer_config.json), or prints its byte census.");
  opts.add_options()
      ("preset", "model config: 'tiny' (the test model, 3 shards, ~20 MiB) or 'flash' "
                 "(DeepSeek-V4-Flash with DSpark, one shard per layer, ~175 GB)",
       cxxopts::value<std::string>())
      ("seed", "global seed xor-ed into every tensor's PRNG; the same seed gives "
               "byte-identical files", cxxopts::value<uint64_t>()->default_value("1"))
      ("out", "output directory (created; must be empty unless --force)",
       cxxopts::value<std::string>())
      ("experts", "trunk routed-expert recipe: 'nvfp4' (U8 + E4M3 block scales + weight_scale_2) "
                  "or 'mxfp4' (I8 + E8M0 scales, the official release); drafter experts are "
                  "always mxfp4", cxxopts::value<std::string>()->default_value("nvfp4"))
      ("trunk-layers", "with --preset flash: keep only trunk layers 0..N-1 (real dimensions "
                       "and kinds) and the globals, without the drafter (N in 1..43; default: "
                       "the full model with DSpark)", cxxopts::value<int>())
      ("dspark-keys", "with --trunk-layers: also write Flash's dspark_* keys (tap targets: the "
                      "last min(3, N) trunk layers) but no mtp.* tensors, so the replay drafter "
                      "can run speculative benchmarks (bench/flash_decode.sh --accept-lens)")
      ("census", "print the resident byte census by class and the totals; writes nothing")
      ("force", "write into a non-empty --out directory (files of the same names are replaced)")
      ("h,help", "show this help");
  const auto parsed = dsv4::parse_tool_args(opts, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("preset")) throw dsv4::Error("--preset is required (tiny or flash; see --help)");
  const std::string preset = args["preset"].as<std::string>();
  const int trunk_layers = args.count("trunk-layers") ? args["trunk-layers"].as<int>() : 0;
  const bool dspark_keys = args.count("dspark-keys") > 0;
  if (dspark_keys && (preset != "flash" || trunk_layers == 0))
    throw dsv4::Error("--dspark-keys goes with --preset flash --trunk-layers N");
  const dsv4::ModelConfig config = dspark_keys ? dsv4::flash_trunk_spec_preset(trunk_layers)
                                               : dsv4::preset_by_name(preset, trunk_layers);

  dsv4::SyntheticOptions so;
  so.seed = args["seed"].as<uint64_t>();
  so.trunk_experts = dsv4::expert_recipe_by_name(args["experts"].as<std::string>());
  so.layout = preset == "tiny" ? dsv4::ShardLayout::compact : dsv4::ShardLayout::per_layer;
  so.tokenizer = preset == "tiny";  // Flash runs use the release's own tokenizer files
  if (dspark_keys) so.drafter_blocks = 0;

  if (args.count("census")) {
    dsv4::CensusOptions co;
    co.trunk_experts = so.trunk_experts;
    co.drafter_experts = so.drafter_experts;
    co.drafter_blocks = so.drafter_blocks;
    print_census(config, co);
    return 0;
  }
  if (!args.count("out")) throw dsv4::Error("--out DIR is required to write (or pass --census)");
  const std::string out = args["out"].as<std::string>();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw dsv4::Error(dsv4::cat("--out ", out, " exists and is not a directory"));
  if (fs::is_directory(out, ec) && !fs::is_empty(out, ec) && !args.count("force"))
    throw dsv4::Error(dsv4::cat("--out ", out, " is not empty (pass --force to write into it)"));
  so.progress = [](const std::string& line) { std::cerr << "dsv4-mkckpt: " << line << std::endl; };
  dsv4::write_synthetic_checkpoint(config, out, so);
  std::cerr << "dsv4-mkckpt: wrote " << config.source << " (seed " << so.seed << ", trunk experts "
            << recipe_name(so.trunk_experts) << ") to " << out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const dsv4::Error& e) {
    std::cerr << "dsv4-mkckpt: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dsv4-mkckpt: error: " << e.what() << "\n";
    return 1;
  }
}
