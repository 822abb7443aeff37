// Sparse sink attention (MODEL.md §4.20 with D12), serving arm: f32 chains in a fixed
// order, split-KV ("flash decoding"). The index row is cut into splits of kSplit entries,
// a constant, so the splits and every reduction order depend on index positions only,
// never on the row count (SPECDECODE.md §6.3 R-I3).
// Pass 1, one block per (row, group of kGroup heads, split): the split's kv rows are
// loaded once into shared memory and serve every head of the group (K = V is one latent
// row shared by all heads); it writes the split's max m_s, sum l_s = Σ e^(l_k - m_s) and
// unnormalized o_s = Σ e^(l_k - m_s) kv_k, k ascending.
// Pass 2, one block per (row, head, dim slice): M = max(sink, m_s...) (D12),
// o = Σ_s e^(m_s - M) o_s / (Σ_s e^(m_s - M) l_s + e^(sink - M)), splits ascending.
// -1 index entries are skipped (law 3); a split of pads only has m_s = -inf and is skipped
// by the combine, so trailing pads change no bit. The dot and PV chains use fmaf (one
// rounding per term; the build's --fmad=false only forbids implicit contraction).
#include <algorithm>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/tile_load.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kSplit = cuda::kWarp;   // index entries per split: one per lane
constexpr int kGroup = 8;             // heads per block: one per warp in the softmax
constexpr int kThreads = kGroup * cuda::kWarp;
constexpr int kKeysPerWarp = kSplit / kGroup;  // logits micro-tile: kGroup heads x 4 keys
constexpr int kMaxCols = 4;           // dims per thread in the PV product
constexpr int kMaxDim = kMaxCols * kThreads;
constexpr int kCombineThreads = 128;
constexpr int kCombineAhead = 16;  // splits whose loads the combine has in flight at once
constexpr int64_t kPartialFloats = int64_t{1} << 23;  // 32 MB of o_s per launch (rows chunked)

// The inverse rope of o's rows (fc null: none): table fc [n_positions, rd], row t at
// positions[t] (backend memory).
struct OutRope {
  const float* fc;
  int rd;
  int64_t n_positions;
  const int32_t* positions;
};

// Sums v[0..32) over the warp; lane l ends with the total of v[l] in v[0]. Recursive
// halving: at offset O every lane keeps half of its live values and adds its partner's
// copy of them, a fixed pairing (31 shuffles instead of 32 butterflies of 5).
template <int O = cuda::kWarp / 2>
__device__ __forceinline__ void warp_transpose_sum(float (&v)[cuda::kWarp]) {
  const bool upper = (threadIdx.x & O) != 0;
#pragma unroll
  for (int i = 0; i < O; ++i) {
    const float send = upper ? v[i] : v[i + O];
    const float keep = upper ? v[i + O] : v[i];
    v[i] = keep + __shfl_xor_sync(cuda::kFullMask, send, O);
  }
  if constexpr (O > 1) warp_transpose_sum<O / 2>(v);
}

// Pass 1. q [rows, heads, dim]; kv [*, dim]; idx [rows, width]; ml [rows, heads, splits, 2]
// = (m_s, l_s); part [rows, heads, splits, dim] = o_s. Grid: x = group * splits + split,
// y = rows. `vec`: kv, q and dim allow 16-byte loads.
__global__ void __launch_bounds__(kThreads)
sink_split_kernel(const float* q, int rows, int heads, int dim, const float* kv, const int32_t* idx, int width,
                  int splits, float scale, bool vec, float* __restrict__ ml,
                  float* __restrict__ part) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float4 smem4[];
  float* p = reinterpret_cast<float*>(smem4);  // [kSplit, kGroup] logits, then weights
  float* tile = p + kSplit * kGroup;           // [kSplit, dim] kv rows of the split
  float* qs = tile + kSplit * dim;             // [kGroup, dim] the group's q rows
  __shared__ bool valid[kSplit];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int split = blockIdx.x % splits, h0 = blockIdx.x / splits * kGroup;
  const int k0 = split * kSplit;
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    const int32_t* row = idx + static_cast<int64_t>(t) * width;
    __syncthreads();  // the previous row's tile, q and p are consumed
    const int32_t lane_j = k0 + lane < width ? row[k0 + lane] : -1;  // lane k: entry k of the split
    for (int k = warp; k < kSplit; k += kGroup) {
      const int32_t j = __shfl_sync(cuda::kFullMask, lane_j, k);
      if (lane == 0) valid[k] = j >= 0;
      const float* src = j >= 0 ? kv + static_cast<int64_t>(j) * dim : nullptr;
      cuda::warp_copy_row_async(tile + k * dim, src, dim, vec);
    }
    {
      const int h = h0 + warp;  // warp w loads head h0 + w
      const float* src = h < heads ? q + (static_cast<int64_t>(t) * heads + h) * dim : nullptr;
      cuda::warp_copy_row_async(qs + warp * dim, src, dim, vec);
    }
    cuda::copies_wait();
    const bool any = __syncthreads_or(lane_j >= 0);  // the loads' barrier; any entry valid
    const int64_t th0 = static_cast<int64_t>(t) * heads;
    if (!any) {  // pads only: nothing to attend, the combine skips this split
      if (threadIdx.x < kGroup && h0 + threadIdx.x < heads) {
        float* m = ml + ((th0 + h0 + threadIdx.x) * splits + split) * 2;
        m[0] = -INFINITY;
        m[1] = 0.0f;
      }
      continue;
    }

    // Logits: warp w computes the kGroup x 4 tile (all heads, keys 4w..4w+3) with lanes
    // striding the dims, then reduces the 32 partials across lanes.
    float acc[cuda::kWarp];
#pragma unroll
    for (int v = 0; v < cuda::kWarp; ++v) acc[v] = 0.0f;
    const float* keys = tile + warp * kKeysPerWarp * dim;
    for (int i = lane; i < dim; i += cuda::kWarp) {
      float kx[kKeysPerWarp];
#pragma unroll
      for (int c = 0; c < kKeysPerWarp; ++c) kx[c] = keys[c * dim + i];
#pragma unroll
      for (int h = 0; h < kGroup; ++h) {
        const float qx = qs[h * dim + i];
#pragma unroll
        for (int c = 0; c < kKeysPerWarp; ++c) {
          float& a = acc[h * kKeysPerWarp + c];
          a = fmaf(qx, kx[c], a);
        }
      }
    }
    {
      warp_transpose_sum(acc);  // acc[0]: head lane / 4, key 4w + lane % 4
      const float dot = acc[0];
      const int k = warp * kKeysPerWarp + lane % kKeysPerWarp;
      p[k * kGroup + lane / kKeysPerWarp] = valid[k] ? scale * dot : -INFINITY;
    }
    __syncthreads();

    // Split softmax statistics: warp w owns head h0 + w, lane k owns entry k.
    {
      const float l = p[lane * kGroup + warp];
      const float m = cuda::warp_max(l);
      const float e = valid[lane] ? expf(l - m) : 0.0f;
      p[lane * kGroup + warp] = e;
      const float sum = cuda::warp_sum(e);
      if (lane == 0 && h0 + warp < heads) {
        float* out = ml + ((th0 + h0 + warp) * splits + split) * 2;
        out[0] = m;
        out[1] = sum;
      }
    }
    __syncthreads();

    // o_s = Σ_k e_k kv_k, k ascending: thread owns dims threadIdx.x + kThreads * c.
    float o[kMaxCols][kGroup];
#pragma unroll
    for (int c = 0; c < kMaxCols; ++c)
#pragma unroll
      for (int h = 0; h < kGroup; ++h) o[c][h] = 0.0f;
    for (int k = 0; k < kSplit; ++k) {
      if (!valid[k]) continue;  // uniform: law 3
      const float4 e0 = reinterpret_cast<const float4*>(p + k * kGroup)[0];
      const float4 e1 = reinterpret_cast<const float4*>(p + k * kGroup)[1];
      const float e[kGroup] = {e0.x, e0.y, e0.z, e0.w, e1.x, e1.y, e1.z, e1.w};
#pragma unroll
      for (int c = 0; c < kMaxCols; ++c) {
        const int i = threadIdx.x + kThreads * c;
        if (i >= dim) break;
        const float x = tile[k * dim + i];
#pragma unroll
        for (int h = 0; h < kGroup; ++h) o[c][h] = fmaf(e[h], x, o[c][h]);
      }
    }
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h0 + h >= heads) break;
      float* out = part + ((th0 + h0 + h) * splits + split) * dim;
#pragma unroll
      for (int c = 0; c < kMaxCols; ++c) {
        const int i = threadIdx.x + kThreads * c;
        if (i >= dim) break;
        out[i] = o[c][h];
      }
    }
  }
}

// Pass 2. Grid: x = head * dim slices + slice, y = rows; o [rows, heads, dim]. With r.fc,
// o's last r.rd dims are then rotated back (sink_attention_rope_dev): the pair (i, i + 1)
// is lanes (2l, 2l + 1) of a warp (dim - rd even, slices of kCombineThreads), each lane
// rotating the pair by cuda::rope_pair as rope_kernel does, so with its bits.
__global__ void __launch_bounds__(kCombineThreads)
sink_combine_kernel(const float* ml, const float* part, int rows,
                    int heads, int dim, int splits, cuda::DenseW sink, OutRope r, float* __restrict__ o) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int slices = (dim + kCombineThreads - 1) / kCombineThreads;
  const int h = blockIdx.x / slices;
  const int i = blockIdx.x % slices * kCombineThreads + threadIdx.x;
  const float sink_logit = sink.at(h);
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    const int64_t th = static_cast<int64_t>(t) * heads + h;
    const float* m = ml + th * splits * 2;
    float mx = sink_logit;  // D12: the sink takes part in the max
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, m[2 * s]);
    float den = 0.0f, acc = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += kCombineAhead) {
      // kCombineAhead splits' statistics and partials loaded before any is used (one round
      // of loads, not one a split), then summed in ascending split as before: the same bits.
      float ms[kCombineAhead], ls[kCombineAhead], ps[kCombineAhead];
#pragma unroll
      for (int u = 0; u < kCombineAhead; ++u) {
        const int s = s0 + u;
        ms[u] = s < splits ? m[2 * s] : -INFINITY;
        ls[u] = s < splits ? m[2 * s + 1] : 0.0f;
        ps[u] = s < splits && i < dim ? part[(th * splits + s) * dim + i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kCombineAhead; ++u) {
        if (ms[u] == -INFINITY) continue;  // pads only, or past the splits (uniform)
        const float w = expf(ms[u] - mx);
        den += w * ls[u];
        if (i < dim) acc += w * ps[u];
      }
    }
    den += expf(sink_logit - mx);  // §4.20: the sink has a zero value vector
    float v = acc / den;
    if (r.fc) {  // uniform
      const float partner = __shfl_xor_sync(cuda::kFullMask, v, 1);
      const int j = i - (dim - r.rd);  // the rope dim
      if (i < dim && j >= 0) {
        float pair[2] = {j % 2 ? partner : v, j % 2 ? v : partner};
        cuda::rope_pair(pair, r.fc, r.rd, r.n_positions, r.positions[t], j / 2, true);
        v = pair[j % 2];
      }
    }
    if (i < dim) o[th * dim + i] = v;
  }
}

}  // namespace

void CudaOps::sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                             const int32_t* idx, int width, const TensorView& sink, float scale,
                             float* o) {
  sink_attention_at(q, rows, heads, dim, kv, idx, width, sink, scale, nullptr, nullptr, o);
}

void CudaOps::sink_attention_rope_dev(const float* q, int rows, int heads, int dim, const float* kv,
                                      const int32_t* idx, int width, const TensorView& sink, float scale,
                                      const RopeTable& t, const int32_t* positions, float* o) {
  const int rd = t.rope_dim;
  DSV4_CHECK(rd > 0 && rd % 2 == 0 && rd <= dim && dim % 2 == 0, "sink_attention_rope_dev: rope_dim=", rd,
             " dim=", dim);
  sink_attention_at(q, rows, heads, dim, kv, idx, width, sink, scale, &t, positions, o);
}

void CudaOps::sink_attention_at(const float* q, int rows, int heads, int dim, const float* kv,
                                const int32_t* idx, int width, const TensorView& sink, float scale,
                                const RopeTable* rope, const int32_t* positions, float* o) {
  if (sink.numel() != heads)
    throw Error(cat("sink_attention: ", sink.name, " has ", sink.numel(), " entries, expected ",
                    heads, " heads"));
  if (dim > kMaxDim)
    throw Error(cat("sink_attention: head dim ", dim, " exceeds the CUDA kernel's limit of ", kMaxDim));
  if (rows == 0 || heads == 0 || dim == 0) return;
  activate();
  const cuda::DenseW s = dense(sink, heads);
  if (width == 0) {  // no entries: o = 0 · kv / e^0
    fill(o, 0.0f, static_cast<size_t>(rows) * heads * dim);
    if (rope) rope_dev(o, rows, heads, dim, *rope, positions, true);
    return;
  }
  const OutRope r = rope ? OutRope{rope_table(*rope), rope->rope_dim, rope->positions, positions}
                         : OutRope{nullptr, 0, 0, nullptr};
  const int splits = (width + kSplit - 1) / kSplit;
  const int groups = (heads + kGroup - 1) / kGroup;
  const int64_t per_row = static_cast<int64_t>(heads) * splits * dim;
  DSV4_CHECK(static_cast<int64_t>(splits) * groups <= INT32_MAX, "sink_attention: width ", width,
             " x heads ", heads, " exceeds the grid");
  const int chunk = static_cast<int>(std::clamp<int64_t>(kPartialFloats / per_row, 1, rows));
  float* part = scratch_f32(Slot::f32_a, static_cast<size_t>(chunk * per_row));
  float* ml = scratch_f32(Slot::f32_b, static_cast<size_t>(chunk) * heads * splits * 2);
  const size_t smem = static_cast<size_t>((kSplit + kGroup) * dim + kSplit * kGroup) * sizeof(float);
  allow_smem(reinterpret_cast<const void*>(sink_split_kernel), smem);
  const bool vec = dim % 4 == 0 && cuda::aligned16(q) && cuda::aligned16(kv);
  const int slices = (dim + kCombineThreads - 1) / kCombineThreads;
  // Rows in chunks bound the partials; each row's arithmetic is the same in any chunk.
  for (int t0 = 0; t0 < rows; t0 += chunk) {
    const int n = std::min(chunk, rows - t0);
    const int64_t r0 = static_cast<int64_t>(t0);
    cuda::launch(sink_split_kernel, dim3(static_cast<unsigned>(splits * groups), cuda::grid_rows(n)), kThreads, smem,
                 stream_, q + r0 * heads * dim, n, heads, dim, kv, idx + r0 * width, width, splits, scale, vec, ml,
                 part);
    cuda::launch(sink_combine_kernel, dim3(static_cast<unsigned>(heads * slices), cuda::grid_rows(n)), kCombineThreads,
                 0, stream_, ml, part, n, heads, dim, splits, s,
                 r.fc ? OutRope{r.fc, r.rd, r.n_positions, r.positions + r0} : r, o + r0 * heads * dim);
  }
}

}  // namespace dsv4
