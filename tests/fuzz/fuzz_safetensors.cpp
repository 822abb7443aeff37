// libFuzzer: the safetensors shard reader (model/safetensors.cpp): length prefix, header
// JSON, dtypes, shapes, offsets. Every view it hands out is read end to end, so a range
// the reader accepted but the file lacks shows up under ASan.
#include "base/error.h"
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dsv4::fuzz::write_input("shard.safetensors", data, size);
  try {
    const dsv4::SafetensorsFile f(path);
    volatile uint8_t sink = 0;
    for (const auto& e : f.entries()) {
      const dsv4::TensorView v = f.view(e.name);
      for (size_t i = 0; i < v.nbytes; ++i) sink = sink ^ v.data[i];
    }
  } catch (const dsv4::Error&) {
  }
  return 0;
}
