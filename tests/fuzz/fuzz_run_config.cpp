// libFuzzer: the run-config YAML reader and its combination checks (launcher/run_config.cpp).
#include <string>

#include "launcher/run_config.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const dsv4::RunConfig c = dsv4::parse_run_config(
        std::string(reinterpret_cast<const char*>(data), size), "run.yaml", "/cfg");
    dsv4::check_run_config(c);
  } catch (const dsv4::Error&) {
  }
  return 0;
}
