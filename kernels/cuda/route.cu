// MoE router (MODEL.md §4.22, D10): the gate logits by linear_island, then one warp per row
// for the scores, the selection and the weights. Score layers pick k times a warp-wide
// argmax over (sc + bias descending, expert id ascending) among the experts not yet picked;
// a row's warp never reads another row, so the result does not depend on the row count
// (SPECDECODE.md §6.3).
#include <algorithm>
#include <climits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kRowsPerBlock = 4;  // one warp each
constexpr int kMaxK = 16;         // experts per token (lanes < k hold the picks)
constexpr int kMaxExperts = 32 * cuda::kWarp;  // a lane's taken mask has 32 bits
constexpr int kNone = INT_MAX;

__device__ float softplus(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

// (va, ia) ranks before (vb, ib): value descending, then id ascending (D10); kNone last.
__device__ bool ranks_before(float va, int ia, float vb, int ib) {
  return ia != kNone && (ib == kNone || va > vb || (va == vb && ia < ib));
}

// §4.22 steps 2-4. logits [rows, E]; tid2eid [vocab, k] (device) with the rows' token ids
// (backend [rows]), or null for score routing. An id outside [0, vocab) gives expert 0 a
// NaN weight (route_dev cannot refuse it by name, kernels/ops.h). Dynamic shared memory:
// kRowsPerBlock * 2 * E floats (sc, biased).
__global__ void route_kernel(const float* logits, int rows, int n_experts, int k, cuda::DenseW bias,
                             const int32_t* tid2eid, const int32_t* ids, int64_t vocab,
                             float route_scale, int32_t* sel, float* wt) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  float* sc = shared + warp * 2 * n_experts;  // this warp's row only
  float* biased = sc + n_experts;
  for (int64_t t = int64_t{blockIdx.x} * kRowsPerBlock + warp; t < rows;
       t += int64_t{gridDim.x} * kRowsPerBlock) {  // warp-uniform
    __syncwarp();  // the previous row's sc is read
    for (int e = lane; e < n_experts; e += cuda::kWarp) {
      sc[e] = sqrtf(softplus(logits[t * n_experts + e]));
      if (!tid2eid) biased[e] = sc[e] + bias.at(e);
    }
    __syncwarp();
    int mine = 0;  // lane j < k: the expert of slot j
    bool known = true;
    if (tid2eid) {
      const int64_t id = ids[t];
      known = id >= 0 && id < vocab;
      if (lane < k && known) mine = tid2eid[id * k + lane];
    } else {
      uint32_t taken = 0;  // bit i: expert lane + 32 i is picked
      for (int j = 0; j < k; ++j) {
        float bv = 0.0f;
        int bi = kNone;
        for (int i = 0, e = lane; e < n_experts; ++i, e += cuda::kWarp)  // ascending e
          if (!(taken >> i & 1u) && ranks_before(biased[e], e, bv, bi)) {
            bv = biased[e];
            bi = e;
          }
        for (int o = cuda::kWarp / 2; o > 0; o >>= 1) {  // every lane ends with the same winner
          const float ov = __shfl_xor_sync(cuda::kFullMask, bv, o);
          const int oi = __shfl_xor_sync(cuda::kFullMask, bi, o);
          if (ranks_before(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
          }
        }
        if (bi % cuda::kWarp == lane) taken |= 1u << (bi / cuda::kWarp);
        if (lane == j) mine = bi;
      }
    }
    // Step 4: unbiased scores, S summed in slot order from 0, divide then scale.
    const float w = lane < k ? (known ? sc[mine] : NAN) : 0.0f;
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += __shfl_sync(cuda::kFullMask, w, j);
    if (lane < k) {
      sel[t * k + lane] = mine;
      wt[t * k + lane] = (w / sum) * route_scale;
    }
  }
}

}  // namespace

void CudaOps::route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                    int n_experts, int k, float route_scale, int32_t* sel, float* wt) {
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
  route_dev(b, x, rows, d_ids, hidden, n_experts, k, route_scale, sel, wt);
}

void CudaOps::route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                        int hidden, int n_experts, int k, float route_scale, int32_t* sel, float* wt) {
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
  linear_island(b.gate_weight, x, rows, logits);  // step 1
  const cuda::DenseW bias = hash ? cuda::DenseW{} : dense(*b.gate_bias, n_experts);
  const int64_t vocab = static_cast<int64_t>(b.tid2eid.size()) / k;
  const size_t shared = sizeof(float) * kRowsPerBlock * 2 * n_experts;
  route_kernel<<<cuda::blocks_for(rows, kRowsPerBlock), kRowsPerBlock * cuda::kWarp, shared, stream_>>>(
      logits, rows, n_experts, k, bias, table, ids, vocab, route_scale, sel, wt);
  DSV4_CUDA_LAUNCH_CHECK();
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
