// The fragment-layout FP4 routed experts (expert_fp4.cuh) of one layer as one host object:
// the entry of the GPU twin test (tests/gpu/test_moe_twin.cpp). Plain C++: the
// host-compiled tests include it. The engine does not call it (CudaOps::moe runs the
// shipped kernel); docs/fp4-fragment-kernel.md says what adopting it changes.
#pragma once
#include <cstdint>
#include <memory>

#include "model/weights.h"

namespace dsv4::cuda {

struct ExpertFrag;  // expert_fp4.cuh

class FragMoe {
 public:
  // Uploads the layer's routed experts (checkpoint layout, one copy per distinct stored
  // projection) and relays them (relayout_fp4), with scratch for up to max_rows rows of k
  // experts each. Refuses widths that are not whole 16 x 128 tiles and MXFP4 scale codes
  // the layout cannot hold, naming them.
  FragMoe(const BlockWeights& b, int max_rows, int k);
  ~FragMoe();
  FragMoe(const FragMoe&) = delete;
  FragMoe& operator=(const FragMoe&) = delete;

  // The native arm's routed experts (MODEL.md §4.23) of `rows` rows of x (device [rows,
  // hidden]): out = the rows' slots summed in ascending expert id + sh (device [rows,
  // hidden]; the shared expert's output). sel / wt: device [rows, k]. Synchronizes the
  // device before and after (a test entry).
  void run(const float* x, int rows, const int32_t* sel, const float* wt, float limit, const float* sh, float* out);
  // The relaid experts [n_experts] (device; the prefill path's test entry, expert_fp4_gemm.h).
  const ExpertFrag* relaid() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace dsv4::cuda
