#include "launcher/weight_source.h"

#include "base/error.h"
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

uint64_t stage_weight_bytes(const PlacementBytes& b, LayerRange r, bool first, bool last) {
  uint64_t n = (first ? b.first : 0) + (last ? b.last : 0);
  for (int l = r.begin; l < r.end; ++l) n += b.layers.at(static_cast<size_t>(l));
  return n;
}

std::string stage_bytes_by_class(const PlacementBytes& b, LayerRange r, bool first, bool last) {
  std::map<ByteClass, uint64_t> sum;
  auto add = [&](const std::map<ByteClass, uint64_t>& m) {
    for (const auto& [cls, n] : m) sum[cls] += n;
  };
  if (first) add(b.first_classes);
  if (last) add(b.last_classes);
  for (int l = r.begin; l < r.end; ++l) add(b.layer_classes.at(static_cast<size_t>(l)));
  std::string out;
  for (const auto& [cls, n] : sum) out += cat(out.empty() ? "" : ", ", byte_class_name(cls), " ", n, " B");
  return out;
}

uint64_t refuse_unless_fits(Ops& ops, uint64_t need, int rank, LayerRange r) {
  const uint64_t free_b = ops.make_weight_memory()->free_bytes();
  if (need > free_b)
    throw Error(cat("placement: rank ", rank, " (layers [", r.begin, ", ", r.end, ") on ", ops.name(),
                    ") needs ", need, " B of weights but its memory has ", free_b,
                    " B free: run more ranks or list a placement that fits"));
  return free_b;
}

}  // namespace dsv4
