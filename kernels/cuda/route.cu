// MoE router (MODEL.md §4.22, D10): the gate logits by linear_island (route, route_dev) or
// linear_island_gemm (route_gemm: a prefill's rows, law 2's tolerance), then one block per row
// for the scores, the selection and the weights. Score layers rank every expert at once:
// rank(e) = the experts ranked before e (sc + bias descending, expert id ascending), so
// the experts of rank < k are the picks in slot order — what k rounds of argmax give,
// without k serial rounds on one warp (issue 12: 13 us a call). A row's block never reads
// another row, and linear_island's logits do not depend on the row count either, so
// route's and route_dev's rows do not (SPECDECODE.md §6.3); route_gemm's GEMM sums in an
// order the shape may change (docs/numerics.md "The prefill GEMMs").
#include <algorithm>
#include <climits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;     // a row's block: expert e on thread e % kThreads
constexpr int kMaxK = 16;         // experts per token
constexpr int kMaxExperts = 4096;  // the rank loop reads them all from shared memory

__device__ float softplus(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

// rank(e): the experts f ranking before e by D10 (value descending, then id ascending):
// biased[f] > v, or biased[f] == v with f < e. Split at f = e into two loops of one
// comparison each, f < e counting biased[f] >= v and f > e counting biased[f] > v (the
// same count, NaN comparing false in both as it does there): issue 13, half the
// instructions of the 256-step loop each of a prefill's 1,024 row blocks runs per thread.
__device__ int rank_of(const float* biased, int n_experts, int e) {
  const float v = biased[e];
  int rank = 0;
  for (int f = 0; f < e; ++f) rank += biased[f] >= v;
  for (int f = e + 1; f < n_experts; ++f) rank += biased[f] > v;
  return rank;
}

// §4.22 steps 2-4. logits [rows, E]; tid2eid [vocab, k] (device) with the rows' token ids
// (backend [rows]), or null for score routing. An id outside [0, vocab) gives expert 0 a
// NaN weight (route_dev cannot refuse it by name, kernels/ops.h); NaN scores leave a slot
// without a unique rank, which takes -1 (its expert is none, moe adds NaN). Dynamic shared
// memory: 2 * E floats (sc, biased).
__global__ void __launch_bounds__(kThreads)
route_kernel(const float* logits, int rows, int n_experts, int k, cuda::DenseW bias, const int32_t* tid2eid,
             const int32_t* ids, int64_t vocab, float route_scale, int32_t* sel, float* wt) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float shared[];
  __shared__ int pick[kMaxK];
  __shared__ bool known;
  float* sc = shared;
  float* biased = sc + n_experts;
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    __syncthreads();  // the previous row's sc and picks are read
    for (int e = threadIdx.x; e < n_experts; e += kThreads) {
      sc[e] = sqrtf(softplus(logits[t * n_experts + e]));
      if (!tid2eid) biased[e] = sc[e] + bias.at(e);
    }
    if (threadIdx.x == 0) known = !tid2eid || (ids[t] >= 0 && ids[t] < vocab);
    __syncthreads();
    if (tid2eid) {
      if (threadIdx.x < k) pick[threadIdx.x] = known ? tid2eid[ids[t] * k + threadIdx.x] : 0;
    } else {
      if (threadIdx.x < k) pick[threadIdx.x] = INT_MAX;
      __syncthreads();
      for (int e = threadIdx.x; e < n_experts; e += kThreads) {
        const int rank = rank_of(biased, n_experts, e);
        if (rank < k) atomicMin(&pick[rank], e);  // one e per rank unless NaN: then the lowest
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // step 4: unbiased scores, S summed in slot order from 0, divide then scale
      float w[kMaxK];
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) {
        if (pick[j] == INT_MAX) pick[j] = -1;
        w[j] = known && pick[j] >= 0 ? sc[pick[j]] : NAN;
        sum += w[j];
      }
      for (int j = 0; j < k; ++j) {
        sel[t * k + j] = pick[j];
        wt[t * k + j] = (w[j] / sum) * route_scale;
      }
    }
  }
}

}  // namespace

void CudaOps::route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                    int n_experts, int k, float route_scale, int32_t* sel, float* wt) {
  route_host_ids(b, x, rows, ids, hidden, n_experts, k, route_scale, /*gemm=*/false, sel, wt);
}

void CudaOps::route_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                         int n_experts, int k, float route_scale, int32_t* sel, float* wt) {
  route_host_ids(b, x, rows, ids, hidden, n_experts, k, route_scale, /*gemm=*/true, sel, wt);
}

void CudaOps::route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                        int hidden, int n_experts, int k, float route_scale, int32_t* sel, float* wt) {
  route_device_ids(b, x, rows, ids, hidden, n_experts, k, route_scale, /*gemm=*/false, sel, wt);
}

void CudaOps::route_host_ids(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                             int n_experts, int k, float route_scale, bool gemm, int32_t* sel, float* wt) {
  const bool hash = !b.tid2eid.empty();
  if (hash) {  // §4.22 step 3: refused here by name, as the CPU reference does
    const int64_t vocab = static_cast<int64_t>(b.tid2eid.size()) / std::max(k, 1);
    for (int t = 0; t < rows; ++t)
      if (ids[t] < 0 || ids[t] >= vocab)
        throw Error(cat("route: layer ", b.layer_id, " token id ", ids[t], " at row ", t,
                        " outside the tid2eid table of ", vocab, " rows"));
  }
  if (rows == 0) return;
  activate();
  const int32_t* d_ids = hash ? stage_i32(Slot::host_args, ids, static_cast<size_t>(rows)) : nullptr;
  route_device_ids(b, x, rows, d_ids, hidden, n_experts, k, route_scale, gemm, sel, wt);
}

void CudaOps::route_device_ids(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                               int n_experts, int k, float route_scale, bool gemm, int32_t* sel, float* wt) {
  if (b.gate_weight.shape != std::vector<int64_t>{n_experts, hidden})
    throw Error(cat("route: layer ", b.layer_id, " ", b.gate_weight.name, " must be [", n_experts,
                    ", ", hidden, "]"));
  if (n_experts > kMaxExperts)
    throw Error(cat("route: layer ", b.layer_id, " has ", n_experts, " experts; the CUDA router takes at most ",
                    kMaxExperts));
  if (k <= 0 || k > n_experts || k > kMaxK)
    throw Error(cat("route: layer ", b.layer_id, " experts per token ", k, " outside [1, ",
                    std::min(n_experts, kMaxK), "]"));
  const bool hash = !b.tid2eid.empty();
  if (!hash && !b.gate_bias)
    throw Error(cat("route: layer ", b.layer_id, " is score-routed but has no gate bias"));
  const int32_t* table = hash ? hash_table(b, n_experts, k) : nullptr;
  if (rows == 0) return;
  activate();
  float* logits = scratch_f32(Slot::f32_a, static_cast<size_t>(rows) * n_experts);
  if (gemm) linear_island_gemm(b.gate_weight, x, rows, logits);  // step 1
  else linear_island(b.gate_weight, x, rows, logits);
  const cuda::DenseW bias = hash ? cuda::DenseW{} : dense(*b.gate_bias, n_experts);
  const int64_t vocab = static_cast<int64_t>(b.tid2eid.size()) / k;
  const size_t shared = sizeof(float) * 2 * n_experts;
  allow_smem(reinterpret_cast<const void*>(route_kernel), shared);
  cuda::launch(route_kernel, cuda::grid_rows(rows), kThreads, shared, stream_, logits, rows, n_experts, k, bias, table,
               ids, vocab, route_scale, sel, wt);
}

const int32_t* CudaOps::hash_table(const BlockWeights& b, int n_experts, int k) {
  const Key key{b.gate_weight.storage, b.gate_weight.data};
  auto it = hash_tables_.find(key);
  if (it == hash_tables_.end()) {
    const std::vector<int32_t>& t = b.tid2eid;
    DSV4_CHECK(t.size() % static_cast<size_t>(k) == 0, "tid2eid size ", t.size(), " k ", k);
    for (const int32_t e : t)  // the kernel indexes its scores with these
      if (e < 0 || e >= n_experts)
        throw Error(cat("route: layer ", b.layer_id, " tid2eid names expert ", e, " outside [0, ",
                        n_experts, ")"));
    const size_t bytes = t.size() * sizeof(int32_t);
    it = hash_tables_.emplace(key, Resident{device_copy(t.data(), bytes), bytes}).first;
  }
  return static_cast<const int32_t*>(it->second.ptr);
}

}  // namespace dsv4
