// The conversions a prefill GEMM runs before cuBLASLt (gemm_prefill.cu, issue 13): an FP8
// weight dequantized to bf16 and an f32 activation split into exact bf16 planes. Two
// kernels each: `elements` one value a thread (any layout), `chunks` 16 FP8 codes / 4
// floats a thread (the layouts *_kernel_for accept); both write the same bits, so which
// one runs is a speed choice only. Host-includable (the twin test and
// dsv4-dev-prefill-gemm call it); device pointers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

enum class ConvertKernel { elements, chunks };

// chunks when codes and out are 16-byte aligned and cols % 16 == 0, else elements.
ConvertKernel fp8_convert_kernel_for(const uint8_t* codes, int64_t cols, const uint16_t* out);
// chunks when x is 16-byte aligned, n % 4 == 0 and out 8-byte aligned, else elements.
ConvertKernel split_kernel_for(const float* x, int64_t n, const uint16_t* out);

// out [rows, cols] = bf16(e4m3(codes) x e8m0(scales)), exact (4 significant bits x 2^k);
// scales [ceil(rows/128), ceil(cols/128)] (CHECKPOINT.md §3.4).
void fp8_to_bf16(ConvertKernel kernel, const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                 uint16_t* out, cudaStream_t stream);
// x [n] f32 -> `terms` bf16 planes out [terms][n]: plane t = bf16(what planes < t leave of x).
void split_bf16(ConvertKernel kernel, const float* x, int64_t n, int terms, uint16_t* out, cudaStream_t stream);

}  // namespace dsv4::cuda
