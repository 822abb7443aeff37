// The prefill routed experts on the fragment layout (expert_fp4_gemm.cuh) of one layer as
// one host object: the entry of the GPU twin test (tests/gpu/test_moe_twin.cpp "moe_gemm
// fp4 fragment path*"). Plain C++: the host-compiled tests include it. The engine reaches
// the same path through routed_fp4_gemm once its native arm holds relaid experts.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/cuda/expert_fp4.h"
#include "model/weights.h"

namespace dsv4::cuda {

class FragGemmMoe {
 public:
  // Layer b's routed experts as `relaid` holds them (FragMoe: uploaded and relaid), with
  // scratch for up to max_rows rows of k experts each.
  FragGemmMoe(const BlockWeights& b, const FragMoe& relaid, int max_rows, int k);
  ~FragGemmMoe();
  FragGemmMoe(const FragGemmMoe&) = delete;
  FragGemmMoe& operator=(const FragGemmMoe&) = delete;

  // moe_gemm's routed experts (MODEL.md §4.23, native arm) of `rows` rows of x (device
  // [rows, hidden]): the tile list built on the device from sel (device [rows, k]), the
  // prefill kernels, out = the rows' slots summed in ascending expert id + sh (device
  // [rows, hidden]). Synchronizes the device before and after (a test entry).
  void run(const float* x, int rows, const int32_t* sel, const float* wt, float limit, const float* sh, float* out);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace dsv4::cuda
