#include "launcher/weight_source.h"

#include "model/error.h"
#include "model/presets.h"

namespace dsv4 {

std::unique_ptr<Checkpoint> open_weights(const RunConfig& c) {
  if (!c.synthetic) return std::make_unique<Checkpoint>(c.model);
  const SyntheticWeights& s = *c.synthetic;
  if (s.trunk_layers > 0 && s.preset != "flash")
    throw Error(cat(c.source, ": trunk_layers: only with preset: flash"));
  SyntheticOptions o;
  o.seed = s.seed;
  o.trunk_experts = s.experts;
  o.share_layers_by_kind = s.share_layers;
  return std::make_unique<Checkpoint>(preset_by_name(s.preset, s.trunk_layers), o);
}

void attach_backend_memory(Checkpoint& ckpt, Ops& ops) {
  if (ckpt.synthetic()) ckpt.attach_weight_memory(ops.make_weight_memory());
}

}  // namespace dsv4
