// libFuzzer: model.safetensors.index.json as the checkpoint reads it (model/checkpoint.cpp):
// weight map, shard names, total_size, drafter blocks and the name census, next to the
// tiny preset's config.json (no shard is opened by the constructor).
#include <fstream>

#include "model/checkpoint.h"
#include "base/error.h"
#include "model/presets.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = [] {
    std::ofstream(dsv4::fuzz::scratch() / "config.json") << dsv4::model_config_json(dsv4::tiny_preset());
    return true;
  }();
  (void)ready;
  dsv4::fuzz::write_input("model.safetensors.index.json", data, size);
  try {
    dsv4::Checkpoint ckpt(dsv4::fuzz::scratch().string());
  } catch (const dsv4::Error&) {
  }
  return 0;
}
