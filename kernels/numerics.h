// The run config's `numerics:` options (MODEL.md "Project decisions", numeric options).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dsv4 {

enum class KvQuant { clamp, e4m3 };          // §4.8 variant (D1: default clamp)
enum class ExpertArm { native, bf16 };       // §4.23 arm B (default) / arm A
enum class DenseAct { bf16, f32 };           // activation operand of every L-bf16 linear
enum class IndexerQuant { fp4, none };       // §4.10/§4.11 on indexer q and keys

struct Numerics {
  KvQuant kv_quant = KvQuant::clamp;
  ExpertArm expert_arm = ExpertArm::native;
  DenseAct dense_act = DenseAct::bf16;
  IndexerQuant indexer_quant = IndexerQuant::fp4;
  bool act_bf16() const { return dense_act == DenseAct::bf16; }
};

// Parses one option value; throws Error naming `numerics.<key>` on an unknown value.
void set_numerics_option(Numerics& n, const std::string& key, const std::string& value);
// Every option as (key, value) in set_numerics_option's spelling, in a fixed order: what
// a boundary dump records and a stage replay compares (launcher/dump_manifest.h).
std::vector<std::pair<std::string, std::string>> numerics_options(const Numerics& n);

}  // namespace dsv4
