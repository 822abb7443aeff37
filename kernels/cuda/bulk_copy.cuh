// Bulk asynchronous copies global -> shared with mbarrier completion (sm_90; PTX ISA
// "cp.async.bulk" and "mbarrier"): a producer posts a stage's byte count on the stage's
// `full` barrier (arrive + expect-tx) and issues the copies, each of which counts its bytes
// off on completion; the phase completes when the producer has arrived and every byte has
// landed, and a consumer that saw it complete (wait_parity) reads the stage. A ring of such
// stages uses a second barrier per stage, `empty`, on which the consumers arrive when
// they are done reading, and the producer waits before it refills the stage.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

__device__ inline uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initializes the block's barriers (`count` arrivals a phase), then calls
// mbarrier_init_fence() and the block syncs before any use: the fences make the
// initialization visible to the other threads and to the copy engine (the async proxy).
__device__ inline void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(count) : "memory");
}
__device__ inline void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}

// The producer's arrival, announcing `bytes` more to land in this phase.
__device__ inline void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(bytes)
               : "memory");
}

// A consumer's arrival (release: its reads of the stage are done before it counts).
__device__ inline void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_addr(bar)) : "memory");
}

// Whether the phase of parity `parity` (0 for a barrier's first phase, then alternating)
// has completed (acquire: the copies' bytes are visible after it).
__device__ inline bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// A phase still open after this long is a protocol bug (bytes announced that never land, an
// arrival missing): the waiter traps, so the launch fails with an error instead of hanging.
// Far beyond any wait of a decode step, where the longest is the producer's for a previous
// kernel under PDL (launch.cuh).
constexpr uint64_t kMbarrierTimeoutNs = uint64_t{20} * 1000 * 1000 * 1000;

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Returns once the phase of parity `parity` has completed.
__device__ inline void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  if (mbarrier_try_wait_parity(bar, parity)) return;
  const uint64_t t0 = global_ns();
  while (!mbarrier_try_wait_parity(bar, parity))
    if (global_ns() - t0 > kMbarrierTimeoutNs) __trap();
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src to
// shared dst, counted off `bar` on completion. src is read by the copy engine, never
// through a register: only memory no earlier kernel of a step writes (launch.cuh) may be
// copied before pdl_wait().
__device__ inline void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_addr(dst)),
               "l"(src), "r"(bytes), "r"(shared_addr(bar))
               : "memory");
}

}  // namespace dsv4::cuda
