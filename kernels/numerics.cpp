#include "kernels/numerics.h"

#include "model/error.h"

namespace dsv4 {

namespace {
[[noreturn]] void bad(const std::string& key, const std::string& value, const char* allowed) {
  throw Error(cat("numerics.", key, ": unknown value '", value, "' (allowed: ", allowed, ")"));
}
}  // namespace

void set_numerics_option(Numerics& n, const std::string& key, const std::string& value) {
  if (key == "kv_quant") {
    if (value == "clamp") n.kv_quant = KvQuant::clamp;
    else if (value == "e4m3") n.kv_quant = KvQuant::e4m3;
    else bad(key, value, "clamp, e4m3");
  } else if (key == "expert_arm") {
    if (value == "native") n.expert_arm = ExpertArm::native;
    else if (value == "bf16") n.expert_arm = ExpertArm::bf16;
    else bad(key, value, "native, bf16");
  } else if (key == "dense_act") {
    if (value == "bf16") n.dense_act = DenseAct::bf16;
    else if (value == "f32") n.dense_act = DenseAct::f32;
    else bad(key, value, "bf16, f32");
  } else if (key == "indexer_quant") {
    if (value == "fp4") n.indexer_quant = IndexerQuant::fp4;
    else if (value == "none") n.indexer_quant = IndexerQuant::none;
    else bad(key, value, "fp4, none");
  } else {
    throw Error(cat("numerics: unknown option '", key,
                    "' (known: kv_quant, expert_arm, dense_act, indexer_quant)"));
  }
}

std::vector<std::pair<std::string, std::string>> numerics_options(const Numerics& n) {
  return {{"kv_quant", n.kv_quant == KvQuant::clamp ? "clamp" : "e4m3"},
          {"expert_arm", n.expert_arm == ExpertArm::native ? "native" : "bf16"},
          {"dense_act", n.dense_act == DenseAct::bf16 ? "bf16" : "f32"},
          {"indexer_quant", n.indexer_quant == IndexerQuant::fp4 ? "fp4" : "none"}};
}

}  // namespace dsv4
