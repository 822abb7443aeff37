// Hyper-connection mix partials and collapse for the many rows of a prefill (issue 13;
// MODEL.md §4.4 steps 1-3, §4.25 steps 1-3): the row-tiled kernels of hc_rows.cu beside
// the shipped ones of hc.cu (tuned for a decode row). Both write the same mix partials
// and the same y bit for bit (the row-tiled kernels keep the shipped per-row f64 order),
// so which one runs is a speed choice only (SPECDECODE.md §6.3 R-I3). Host-includable
// (the twin test and the dev bench call it); device pointers, f32 or bf16 weights.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dsv4::cuda {

// row_quads: row_tiled's kernels, the mix with four rows a thread (hc_rows.cu MixRows).
enum class HcKernels { shipped, row_tiled, row_quads };

// Doubles of the mix partials of `rows` rows of width hc * hidden against m mixes.
size_t hc_part_count(int64_t rows, int64_t width, int m);

// part[(t * (m + 1) + j) * slices + s] = the slice-s partial of mix j (j < m) or of the
// sum of squares (j = m) of row t of h [rows, width] against fn [m, width].
void hc_mix_partials(HcKernels kernels, const float* h, int64_t rows, int64_t width, const void* fn,
                     bool fn_bf16, int m, double* part, cudaStream_t stream);

// y [rows, hidden] = sum_c pre[t, c] h[t, c, :] with pre from part's mixes 0..hc-1 and
// sum of squares, scale[0] and base[0..hc) (f32 or bf16, `bf16` for both).
void hc_collapse(HcKernels kernels, const float* h, const double* part, int64_t rows, int hc, int hidden,
                 int m, double norm_eps, const void* scale, const void* base, bool bf16, double hc_eps,
                 float* y, cudaStream_t stream);

// out [rows, hc, hidden] = hc_post's (§4.5) by the row-tiled kernel (16-byte accesses where
// hidden % 4 == 0 and x, res, out are 16-byte aligned): the shipped kernel's bits, which
// CudaOps::hc_post runs below kHcRowTiledFrom rows.
void hc_post_rows(const float* x, const float* res, const float* post, const float* comb, int64_t rows, int hc,
                  int hidden, float* out, cudaStream_t stream);

}  // namespace dsv4::cuda
