#include "launcher/placement_plan.h"

#include "model/census.h"
#include "base/error.h"

namespace dsv4 {

namespace {
// From the index alone (no shard is opened): the recipe whose block-scale sibling the
// index names. A block that names neither sizes as MXFP4 here; loading it refuses it (R10).
ExpertRecipe recipe_of(const Checkpoint& ckpt, const std::string& block) {
  const std::string stem = block + ".ffn.experts.0.w1";
  return expert_recipe_of_scale_sibling([&](const char* suffix) { return ckpt.has(stem + suffix); })
      .value_or(ExpertRecipe::mxfp4);
}
}  // namespace

PlacementBytes placement_bytes(const Checkpoint& ckpt, bool drafter) {
  const ModelConfig& config = ckpt.config();
  CensusOptions opt;
  opt.trunk_experts = recipe_of(ckpt, "layers.0");
  opt.nvfp4_input_scale = ckpt.has("layers.0.ffn.experts.0.w1.input_scale");
  opt.drafter_blocks = ckpt.drafter_blocks();
  if (opt.drafter_blocks > 0) opt.drafter_experts = recipe_of(ckpt, "mtp.0");

  const int n_layers = config.num_hidden_layers;  // L
  PlacementBytes out;
  out.layers.assign(static_cast<size_t>(n_layers), 0);
  out.layer_classes.resize(static_cast<size_t>(n_layers));
  auto to_last = [&](const CensusEntry& e) {
    out.last += e.bytes();
    out.last_classes[e.cls] += e.bytes();
  };
  for (const CensusEntry& e : tensor_census(config, opt)) {
    const uint64_t b = e.bytes();
    if (e.name == "embed.weight") {
      out.first += b;
      out.first_classes[e.cls] += b;
      if (drafter) to_last(e);  // the head rank's own copy for draft rows (S10)
    } else if (e.layer_id >= 0 && e.layer_id < n_layers) {
      out.layers[static_cast<size_t>(e.layer_id)] += b;
      out.layer_classes[static_cast<size_t>(e.layer_id)][e.cls] += b;
    } else if (e.layer_id >= n_layers || e.cls == ByteClass::drafter_extra) {
      if (drafter) to_last(e);
    } else {
      to_last(e);  // head.weight, norm.weight, hc_head_*
    }
  }
  return out;
}

std::vector<LayerRange> plan_placement(const std::vector<LayerRange>& listed,
                                       const PlacementBytes& bytes, int ranks) {
  const int n_layers = static_cast<int>(bytes.layers.size());
  try {
    if (listed.empty()) return balance_layers(bytes.layers, ranks, bytes.first, bytes.last);
    validate_ranges(listed, n_layers, ranks);
    return listed;
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(cat(what.rfind("placement", 0) == 0 ? "" : "placement: ", what, " (", ranks,
                    " ranks, ", n_layers, " trunk layers)"));
  }
}

}  // namespace dsv4
