// The PTX pieces of an mbarrier-paced shared-memory ring (PTX ISA "mbarrier",
// "cp.async.bulk", "cp.async.mbarrier.arrive"; compute capability 9.0): a barrier's phase
// completes when its pending arrivals reach zero and its transaction count (bytes expected
// by expect_tx, retired by the bulk copies' complete_tx) is zero; a waiter names the phase
// by its parity (the n-th completion has parity n & 1). Used by the wgmma prefill kernel's
// ring (expert_fp4_wgmma.cu WgmmaTmaPolicy).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda::mbarrier {

__device__ inline uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// One thread: the barrier expects `count` arrivals a phase. Then init_fence() and a block
// barrier before any other thread uses it.
__device__ inline void init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem(bar)), "r"(count) : "memory");
}
__device__ inline void init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// One arrival (release: this thread's earlier accesses happen before the phase completes).
__device__ inline void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem(bar)) : "memory");
}
// One arrival that also expects `bytes` more of the phase's bulk copies.
__device__ inline void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem(bar)), "r"(bytes) : "memory");
}
// One arrival, made when every cp.async this thread issued before it has landed (.noinc:
// the barrier's count includes it).
__device__ inline void arrive_on_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem(bar)) : "memory");
}

// Until the phase of parity `parity` has completed (acquire: the accesses released into it,
// and the bulk copies it counted, are visible after).
__device__ inline void wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra retry;\n"
      "}\n" ::"r"(smem(bar)),
      "r"(parity)
      : "memory");
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared through the
// async proxy, retiring `bytes` of bar's transaction count when they land.
__device__ inline void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem(dst)),
               "l"(src), "r"(bytes), "r"(smem(bar))
               : "memory");
}

}  // namespace dsv4::cuda::mbarrier
