// The device-step ops of plain decode and verify rows (kernels/ops.h "device step"), CPU reference:
// the position is read from backend (here host) memory and every position-dependent
// address is computed from it, with the same laws the host builders use.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/weight_cache.h"
#include "kernels/numerics.h"
#include "kernels/rope_table.h"
#include "model/weights.h"

namespace dsv4 {

// Ops::finish_kv: cpu_rmsnorm, cpu_rope at positions [rows], cpu_kv_act_quant.
void cpu_finish_kv(CpuWeightCache& cache, float* kv, const TensorView& norm, int rows, int dim, double eps,
                   const RopeTable& rope, const int32_t* positions, KvQuant variant);
// Ops::finish_kv_at: cpu_finish_kv of the one row at *pos, then the ring slot.
void cpu_finish_kv_at(CpuWeightCache& cache, float* kv, const TensorView& norm, int dim, double eps,
                      const RopeTable& rope, const int32_t* pos, KvQuant variant, float* ring,
                      int slots);

// Ops::decode_index: per row the window row of kernels/index_laws (decode, or verify with
// trans_base >= 0), the coarse row (ratio > 4) and -1 pads up to window + tail_width;
// n_visible[t] = (p+1)/4 for ratio 4.
void cpu_decode_index(const int32_t* pos, int rows, int ratio, int window, int tail_width,
                      int trans_base, int32_t* idx, int32_t* n_visible);

// Ops::compress_at: the rows to their pending slot, the block completed
// at *pos (if any) by cpu_compress_blocks into its store row, then the overlap shift
// (cur -> prev).
void cpu_compress_at(CpuWeightCache& cache, const CompressorWeights& c, const int32_t* pos,
                     const float* row_kv, const float* row_score, float* pend_kv,
                     float* pend_score, const RopeTable& rope, double norm_eps,
                     const Numerics& num, float* store);

}  // namespace dsv4
