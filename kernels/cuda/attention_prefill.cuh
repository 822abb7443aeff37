// Sparse sink attention for the many rows of a prefill (issue 13; MODEL.md §4.20 with
// D12) on tensor cores: attention_prefill.cu. Same problem as Ops::sink_attention; the
// sink is the device copy CudaOps::dense gives (F32, or BF16 when `sink_bf16`). Law 2's
// tolerance against the CPU reference, and row independence (a row's bits never depend
// on the other rows). Host-includable (the twin test and the dev bench call it).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

// The head dims the kernel takes: a multiple of 64 (one warp per 64 dims), at most 512.
bool prefill_attention_supports(int dim);

// o [rows, heads, dim] = sink attention of q [rows, heads, dim] over kv rows kv[idx[t, k]]
// (idx [rows, width], -1 entries inert), sink [heads] in device memory, on `stream`.
// Throws an Error naming the limit for a dim it does not take or a width beyond its
// shared memory.
void sink_attention_prefill(const float* q, int rows, int heads, int dim, const float* kv,
                            const int32_t* idx, int width, const void* sink, bool sink_bf16,
                            float scale, float* o, cudaStream_t stream);

}  // namespace dsv4::cuda
