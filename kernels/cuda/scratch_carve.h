// One device scratch carved into parts (the MoE's: CudaOps::carve_scratch in moe.cu, moe_prefill.cu;
// expert_fp4_gemm.cu): parts of the given float counts in order, each starting 32-byte
// aligned (the kernels' 128-bit loads and cp.async copies need 16). A plain header.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace dsv4::cuda {

constexpr int64_t kCarveAlign = 8;  // floats: 32 bytes

inline int64_t carve_padded(int64_t n) { return (n + kCarveAlign - 1) / kCarveAlign * kCarveAlign; }

// The floats the parts take together.
template <size_t N>
size_t carved_floats(const std::array<int64_t, N>& sizes) {
  int64_t total = 0;
  for (int64_t n : sizes) total += carve_padded(n);
  return static_cast<size_t>(total);
}

// The parts' starts in base (carved_floats(sizes) floats).
template <size_t N>
std::array<float*, N> carve(float* base, const std::array<int64_t, N>& sizes) {
  std::array<float*, N> parts{};
  for (size_t i = 0; i < N; ++i) {
    parts[i] = base;
    base += carve_padded(sizes[i]);
  }
  return parts;
}

}  // namespace dsv4::cuda
