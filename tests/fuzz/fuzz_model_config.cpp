// libFuzzer: config.json (model/config.cpp): strict JSON, every field's type and bound.
#include <string>

#include "model/config.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dsv4::parse_model_config(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const dsv4::Error&) {
  }
  return 0;
}
