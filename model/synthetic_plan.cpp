// Recipes of synthetic tensors (CHECKPOINT.md §3.8): master ranges by name, encoders by
// stored dtype, scales tied to their weight's master stream.
#include "model/synthetic_plan.h"

#include <cmath>
#include <map>
#include <numeric>

#include "base/error.h"

namespace dsv4 {

namespace {

// Routed-expert gate/up (w1, w3) masters are drawn this many times wider than the plain
// ±sqrt(3/fan_in), so some gate/up pre-activations exceed ±swiglu_limit = 10 and the
// clamp is exercised (§6.2 swiglu_limit row): with a unit-RMS input a pre-activation is
// then about N(0, 3^2), i.e. ~1e-3 of them beyond ±10.
constexpr double kExpertGateUpAmplitude = 3.0;

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

bool is_quantized(const CensusEntry& e) {
  return ends_with(e.name, ".weight") &&
         (e.dtype == DType::F8_E4M3 || e.dtype == DType::I8 || e.dtype == DType::U8);
}

std::string stem_of(const std::string& name) { return name.substr(0, name.rfind('.')); }

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// The recipe of a quantized weight; its siblings copy it with their own kind.
SynthTensor weight_recipe(const CensusEntry& w, uint64_t seed) {
  SynthTensor t;
  t.state = fnv1a64(w.name) ^ seed;
  t.rows = w.shape.at(0);
  t.cols = w.dtype == DType::F8_E4M3 ? w.shape.at(1) : 2 * w.shape.at(1);
  const Range r = master_range(w, t.cols);
  t.lo = r.lo;
  t.hi = r.hi;
  t.kind = w.dtype == DType::F8_E4M3 ? SynthKind::fp8_codes
           : w.dtype == DType::I8    ? SynthKind::mx_packed
                                     : SynthKind::nv_packed;
  return t;
}

}  // namespace

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t SynthTensor::bytes() const { return static_cast<uint64_t>(numel(shape)) * dtype_size(dtype); }

std::vector<SynthTensor> synth_plan(const std::vector<CensusEntry>& census, int64_t n_experts,
                                    uint64_t seed) {
  std::map<std::string, const CensusEntry*> weights;  // quantized weights by stem
  for (const CensusEntry& e : census)
    if (is_quantized(e)) weights[stem_of(e.name)] = &e;

  std::vector<SynthTensor> plan;
  plan.reserve(census.size());
  for (const CensusEntry& e : census) {
    SynthTensor t;
    const auto w = weights.find(stem_of(e.name));
    if (w != weights.end()) {  // the weight itself or one of its scales
      t = weight_recipe(*w->second, seed);
      const std::string suffix = e.name.substr(w->first.size());
      const bool fp8 = t.kind == SynthKind::fp8_codes, mx = t.kind == SynthKind::mx_packed;
      if (suffix == ".scale") t.kind = fp8 ? SynthKind::fp8_scales : SynthKind::mx_scales;
      else if (suffix == ".weight_scale") t.kind = SynthKind::nv_scales;
      else if (suffix == ".weight_scale_2") t.kind = SynthKind::nv_scale_2;
      else if (suffix == ".input_scale") t.kind = SynthKind::one;
      else DSV4_CHECK(suffix == ".weight", "synthetic recipe of ", e.name);
      DSV4_CHECK(!(mx && (suffix == ".weight_scale" || suffix == ".weight_scale_2")),
                 "MXFP4 weight with an NVFP4 sibling: ", e.name);
    } else if (e.dtype == DType::I64) {
      t.kind = SynthKind::tid2eid;
      t.state = fnv1a64(e.name) ^ seed;
      t.experts = n_experts;
    } else {
      DSV4_CHECK(e.dtype == DType::F32 || e.dtype == DType::BF16, "synthetic island ", e.name,
                 " of dtype ", dtype_name(e.dtype));
      t.kind = SynthKind::island;
      t.state = fnv1a64(e.name) ^ seed;
      t.rows = 1;
      t.cols = numel(e.shape);
      const Range r = master_range(e, e.shape.empty() ? 1 : e.shape.back());
      t.lo = r.lo;
      t.hi = r.hi;
    }
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    plan.push_back(std::move(t));
  }
  return plan;
}

}  // namespace dsv4
