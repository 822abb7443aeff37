// Hyper-connection mix partials and collapse for the many rows of a prefill (issue 13;
// MODEL.md §4.4 steps 1-3, §4.25 steps 1-3): the row-tiled kernels of hc_rows.cu beside
// the shipped ones of hc.cu (tuned for a decode row). shipped, row_tiled and row_quads
// write the same mix partials and the same y bit for bit (the row-tiled kernels keep the
// shipped per-row f64 order), so which of them runs is a speed choice only (SPECDECODE.md
// §6.3 R-I3). dmma and dmma_pairs (hc_dmma.cu, the f64 tensor cores; the same bits as each
// other) write the same partial layout, the same exact f64 products summed in another fixed
// order: their partials may differ from the shipped ones by a few f64 roundings (~1e-16
// relative), so their y by a pre's f32 ulp. They are tolerance-bound (law 2: a prefill's
// rows only, from kHcRowTiledFrom), never for decode or verify rows, which R-I3 holds to
// the shipped bits. Every set gives a row bits that depend on that row alone, never on the
// row count or on the other rows. Host-includable (the twin test and the dev bench call
// it); device pointers, f32 or bf16 weights.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dsv4::cuda {

// The rows from which CudaOps::hc_pre runs HcKernels::dmma (and hc_post hc_post_rows): a
// prefill chunk's. A verify round has at most tmax = B + 1 rows (6 for Flash) and a plain
// decode step one, so their rows always take the shipped kernels' bits (R-I3).
inline constexpr int64_t kHcRowTiledFrom = 64;

// row_quads: row_tiled's kernels, the mix with four rows a thread (hc_rows.cu MixRows).
// dmma: the mix on the f64 tensor cores (hc_dmma.cu; tolerance-bound, above), row_tiled's
// collapse; dmma_pairs: dmma's bits, two slices a block (a 16-byte store per two partials).
enum class HcKernels { shipped, row_tiled, row_quads, dmma, dmma_pairs };

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
