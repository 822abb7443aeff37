// libFuzzer: a --dump-boundary file as --replay reads it (launcher/boundary_dump.cpp):
// the safetensors layer below plus the header tensors' types, counts and ranges.
#include "launcher/boundary_dump.h"
#include "base/error.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsv4::fuzz::write_input("rank0_op0_recv.safetensors", data, size);
  try {
    dsv4::read_boundary_record(dsv4::fuzz::scratch().string(), 0, 0, false);
    dsv4::count_dumped_operations(dsv4::fuzz::scratch().string(), 0);
  } catch (const dsv4::Error&) {
  }
  return 0;
}
