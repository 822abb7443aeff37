// dsv4-step-bytes: the bytes one batch-1 decode step reads (CHECKPOINT.md §5.3), from the
// tensor census of a checkpoint's config or of a preset. A step reads every dense tensor
// of every trunk layer, K of the E routed experts per layer (without input_scale, which
// is ignored on load, C3), one tid2eid row in hash layers, the whole head (head.weight,
// norm, hc_head_*) and one embedding row; never the drafter.
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <map>
#include <string>

#include "launcher/tool_args.h"
#include "model/census.h"
#include "model/checkpoint.h"
#include "base/error.h"
#include "model/presets.h"
#include "model/step_bytes.h"

namespace {

using dsv4::ByteClass;
using dsv4::ExpertRecipe;

int run(int argc, char** argv) {
  cxxopts::Options opts("dsv4-step-bytes",
                        "Prints the bytes one batch-1 decode step reads (CHECKPOINT.md §5.3): "
                        "a table by byte class, then 'step_bytes <total>'.");
  opts.add_options()
      ("model", "checkpoint directory: config.json and the expert recipe of its tensors",
       cxxopts::value<std::string>())
      ("preset", "instead of --model: 'tiny' or 'flash'", cxxopts::value<std::string>())
      ("trunk-layers", "with --preset flash: trunk layers 0..N-1 only (as dsv4-mkckpt)",
       cxxopts::value<int>())
      ("experts", "with --preset: trunk routed-expert recipe, nvfp4 or mxfp4",
       cxxopts::value<std::string>()->default_value("nvfp4"))
      ("h,help", "show this help");
  const auto parsed = dsv4::parse_tool_args(opts, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (args.count("model") == args.count("preset"))
    throw dsv4::Error("pass exactly one of --model DIR or --preset tiny|flash (see --help)");

  dsv4::ModelConfig config;
  dsv4::CensusOptions co;
  if (args.count("model")) {
    const dsv4::Checkpoint ckpt(args["model"].as<std::string>());
    config = ckpt.config();
    co.trunk_experts = ckpt.has("layers.0.ffn.experts.0.w1.weight_scale") ? ExpertRecipe::nvfp4
                                                                            : ExpertRecipe::mxfp4;
  } else {
    config = dsv4::preset_by_name(args["preset"].as<std::string>(),
                                  args.count("trunk-layers") ? args["trunk-layers"].as<int>() : 0);
    co.trunk_experts = dsv4::expert_recipe_by_name(args["experts"].as<std::string>());
  }
  const std::map<ByteClass, uint64_t> by_class = dsv4::step_weight_bytes(config, co.trunk_experts);
  uint64_t total = 0;
  for (const auto& [cls, bytes] : by_class) total += bytes;
  std::printf("bytes one decode step reads (CHECKPOINT.md §5.3): %s, %d trunk layers, %s experts "
              "(K = %d of %d)\n", config.source.c_str(), config.num_hidden_layers,
              co.trunk_experts == ExpertRecipe::nvfp4 ? "nvfp4" : "mxfp4",
              config.num_experts_per_tok, config.n_routed_experts);
  for (const auto& [cls, bytes] : by_class)
    std::printf("  %-16s %16llu\n", dsv4::byte_class_name(cls),
                static_cast<unsigned long long>(bytes));
  std::printf("step_bytes %llu\n", static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::tool_main("dsv4-step-bytes", run, argc, argv); }
