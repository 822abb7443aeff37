// The staged decode expert kernel (MODEL.md §4.23; moe_experts.cuh) and the choice of the
// expert kernel (expert_kernel.h). It computes expert_mma_kernel's work items with its
// chunks, products and epilogue (cuda::chunk_product, cuda::tile_epilogue), so its bits
// are the shipped kernel's; what changes is how the weights arrive. The shipped kernel
// loads two chunks per warp into registers and then waits for them, once per item: the
// memory pipe idles while a warp decodes, and an item's first load waits behind the
// previous item's epilogue. Here each lane streams its own 16-byte runs and 4-byte scale
// words through a per-warp ring of S shared-memory slots by cp.async, S - 1 chunk steps
// ahead of the mma, across items, so (S - 1) x 2 KB (up) / 1 KB (down) per warp stay in
// flight through the decode and the epilogue's barriers; and the activation loads lose
// their branches (cuda::XLoads::staged: aligned, a zero column reads column 0).
#include <cuda_runtime.h>

#include <atomic>

#include "base/cuda_check.h"
#include "kernels/cuda/moe_experts.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = cuda::kExpertThreads;
constexpr int kWarps = cuda::kKWarps;
constexpr int kTileRows = cuda::kMmaRows;
constexpr int kChunk = cuda::kKChunk;
using cuda::MmaArgs;

// One ring slot of a warp: lane l's 16-byte runs of projection j, row m0 + g + 8h, and the
// 4-byte scale words that hold their block scale codes, lane-major: a warp's copies and
// reads of one [j][h] are 512 / 128 contiguous bytes (no bank conflicts).
template <int NW>
struct Slot {
  uint4 run[NW][2][cuda::kWarp];
  uint32_t scale[NW][2][cuda::kWarp];
};

// cp.async (PTX ISA "cp.async"): .cg (L2 only) for the weight runs, read once; .ca for
// the scale words (4 bytes: .cg takes 16 only). A lane reads back only what it copied, so
// its own wait_group orders its reads; the "memory" clobbers keep the compiler's shared
// memory accesses on their side of the copies and the waits.
__device__ inline void copy16(void* dst, const void* src) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ inline void copy4(void* dst, const void* src) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ inline void wait_copies() {  // all but the newest N groups complete
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// A warp's copies, S - 1 (item, chunk) steps ahead of its mma: items blockIdx.x,
// + gridDim.x, ... below `items`, in each the chunks warp, warp + 8, ... below `chunks` —
// the order the kernel consumes them in. A warp with no chunk (chunks <= warp) copies
// nothing; past the last step a commit group is empty.
template <int NW>
struct Feeder {
  int64_t m_tiles, items, item;  // item: the next step's (>= items: done)
  int chunks, c;                 // c: the next step's chunk
  int64_t m0;                    // the item's first weight row
  const uint8_t* packed[NW];
  const uint8_t* scales[NW];
  int gs[NW];  // log2 of the scale group

  __device__ Feeder(const MmaArgs& a, int64_t m_tiles_, int64_t items_, int chunks_)
      : m_tiles(m_tiles_), items(items_), item(items_), chunks(chunks_), c(0), m0(0) {
    const int warp = threadIdx.x / cuda::kWarp;
    if (warp < chunks) enter(a, blockIdx.x, warp);
  }
  // The item's projections (loaded now, used at the next step). The tile's entry and slots
  // reach L1 S - 1 steps before the kernel's TileItem reads them.
  __device__ void enter(const MmaArgs& a, int64_t i, int c0) {
    item = i;
    c = c0;
    if (item >= items) return;
    const int64_t tile = item / m_tiles;
    asm volatile("prefetch.global.L1 [%0];\n" ::"l"(a.tiles.slot + tile * cuda::kMmaCols));
    cuda::Fp4W w[NW];
    cuda::projections<NW>(a.tiles.w[tile], w);
    m0 = item % m_tiles * kTileRows;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      packed[j] = w[j].packed;
      scales[j] = w[j].scales;
      gs[j] = __ffs(w[j].group) - 1;
    }
  }
  // The next step's runs into `slot` (none when done) as one commit group, then advance.
  __device__ void step(const MmaArgs& a, Slot<NW>& slot) {
    if (item < items) {
      const int lane = threadIdx.x % cuda::kWarp, g = lane / 4, t = lane % 4;
      const int64_t k0 = int64_t{c} * kChunk + 32 * t;
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = m0 + g + 8 * h;
          copy16(&slot.run[j][h][lane], packed[j] + r * (a.k >> 1) + (k0 >> 1));
          // The scale word holding code (r k + k0) >> gs (and that of k0 + 16: the same
          // word, since (r k) >> gs is a multiple of 4 for k % 128 == 0, check_experts).
          const int64_t code = ((r * a.k) >> gs[j]) + (k0 >> gs[j]);
          copy4(&slot.scale[j][h][lane], scales[j] + (code & ~int64_t{3}));
        }
      if (c + kWarps < chunks)
        c += kWarps;
      else
        enter(a, item + gridDim.x, threadIdx.x / cuda::kWarp);
    }
    commit_copies();
  }
};

// expert_mma_kernel's items (moe.cu), each lane's runs read from its warp's ring: step n
// of a warp reads slot n % S after waiting for its copies, then refills slot (n - 1) % S
// (read by step n - 1, whose registers hold it) with step n + S - 1.
template <int NW, int P, int S, cuda::Fp4Decode kDecode>
__global__ void __launch_bounds__(kThreads, cuda::kMinBlocks<NW>) expert_staged_kernel(MmaArgs a) {
  static_assert(S >= 2, "one slot read while the others fill");
  extern __shared__ uint4 smem[];  // part, then the warps' rings
  using Part = float[kWarps][NW][4][cuda::kWarp];
  static_assert(sizeof(Part) % sizeof(uint4) == 0 && sizeof(Slot<NW>) % sizeof(uint4) == 0);
  Part& part = *reinterpret_cast<Part*>(smem);
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int t = lane % 4;
  Slot<NW>* ring = reinterpret_cast<Slot<NW>*>(smem + sizeof(Part) / sizeof(uint4)) + warp * S;
  const int64_t m_tiles = a.m / kTileRows;
  const int64_t items = *a.tiles.count * m_tiles;
  const int chunks = static_cast<int>(a.k / kChunk);
  Feeder<NW> feed(a, m_tiles, items, chunks);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) feed.step(a, ring[s]);
  int slot = 0;
#pragma unroll 1
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t m0 = item % m_tiles * kTileRows;
    cuda::TileItem<NW, cuda::XLoads::staged> it(a, item / m_tiles);
    // Bit offset of half `half`'s scale code in the lane's scale word: byte ((k0 + 16 half)
    // >> gs) & 3, the same in every chunk (128 c >> gs is a multiple of 4).
    int code_shift[NW][2];
#pragma unroll
    for (int j = 0; j < NW; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) code_shift[j][half] = 8 * (((32 * t + 16 * half) >> it.gs[j]) & 3);
#pragma unroll 1
    for (int c = warp; c < chunks; c += kWarps) {
      wait_copies<S - 2>();
      const Slot<NW>& in = ring[slot];
      const int64_t k0 = int64_t{c} * kChunk + 32 * t;
      uint32_t raw[NW][2][4];
      uint8_t sc[NW][2][2];
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 q = in.run[j][h][lane];
          raw[j][h][0] = q.x, raw[j][h][1] = q.y, raw[j][h][2] = q.z, raw[j][h][3] = q.w;
          const uint32_t word = in.scale[j][h][lane];
#pragma unroll
          for (int half = 0; half < 2; ++half)
            sc[j][h][half] = static_cast<uint8_t>(word >> code_shift[j][half]);
        }
      feed.step(a, ring[(slot + S - 1) % S]);
      slot = (slot + 1) % S;
      cuda::chunk_product<NW, P, cuda::XLoads::staged, kDecode>(it.w, raw, sc, it.x + k0, it.acc);
    }
    cuda::tile_epilogue<NW>(a, it.slots, it.w, m0, it.acc, part);
    __syncthreads();  // `part` is rewritten by the next item
  }
}

// Dynamic shared memory of expert_staged_kernel<NW, P, S, ...>: part + 8 rings of S slots
// (NW = 2, S = 4: 8 KB + 80 KB, two blocks per SM; NW = 1: 4 KB + 40 KB, three).
template <int NW, int S>
constexpr size_t kStagedSmem = sizeof(float) * kWarps * NW * 4 * cuda::kWarp + sizeof(Slot<NW>) * kWarps * S;

template <int NW, int P, int S, cuda::Fp4Decode kDecode>
void launch_staged(const MmaArgs& a, int64_t items_max, int device, cudaStream_t stream) {
  constexpr size_t smem = kStagedSmem<NW, S>;
  constexpr auto kernel = expert_staged_kernel<NW, P, S, kDecode>;
  const int64_t blocks = cuda::resident_grid<kernel, smem>(items_max, device);
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(a);
  DSV4_CUDA_LAUNCH_CHECK();
}

template <int S, cuda::Fp4Decode kDecode = cuda::Fp4Decode::lookup>
void launch_staged(int nw, int planes, const MmaArgs& a, int64_t items_max, int device, cudaStream_t stream) {
  if (nw == 2)
    planes == 1 ? launch_staged<2, 1, S, kDecode>(a, items_max, device, stream)
                : launch_staged<2, 3, S, kDecode>(a, items_max, device, stream);
  else
    planes == 1 ? launch_staged<1, 1, S, kDecode>(a, items_max, device, stream)
                : launch_staged<1, 3, S, kDecode>(a, items_max, device, stream);
}

std::atomic<cuda::ExpertKernel> chosen{cuda::ExpertKernel::shipped};

}  // namespace

namespace cuda {

void use_expert_kernel(ExpertKernel kernel) { chosen = kernel; }
ExpertKernel expert_kernel() { return chosen; }

void launch_expert_kernel(ExpertKernel kernel, int nw, int planes, const MmaArgs& a, int64_t items_max, int device,
                          cudaStream_t stream) {
  switch (kernel) {
    case ExpertKernel::staged3:
      return launch_staged<3>(nw, planes, a, items_max, device, stream);
    case ExpertKernel::staged4:
      return launch_staged<4>(nw, planes, a, items_max, device, stream);
    case ExpertKernel::staged4_placed:
      return launch_staged<4, Fp4Decode::placed>(nw, planes, a, items_max, device, stream);
    default:  // the shipped kernel at its knobs
      return launch_expert_mma(kernel, nw, planes, a, items_max, device, stream);
  }
}

}  // namespace cuda

}  // namespace dsv4
