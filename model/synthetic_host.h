// The host generator of synthetic tensors: the stored bytes of one recipe
// (model/synthetic_plan.h), the same bytes the CUDA generator writes in device memory.
#pragma once
#include <cstdint>
#include <vector>

#include "model/synthetic_plan.h"

namespace dsv4 {

// Writes t.bytes() bytes to out.
void synth_generate_host(const SynthTensor& t, uint8_t* out);
inline std::vector<uint8_t> synth_generate_host(const SynthTensor& t) {
  std::vector<uint8_t> b(t.bytes());
  synth_generate_host(t, b.data());
  return b;
}

}  // namespace dsv4
