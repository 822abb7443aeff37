// Which tensor-core GEMV computes an FP8 linear of 8 MiB and more (linear.cuh): `tc` is the
// register-prefetch kernel (gemv_tc.cuh), `ring` the cp.async ring (gemv_tc_ring.cuh) that
// feeds the same arithmetic, so the two give the same bits; the engine runs `automatic`,
// which picks by the row count alone (kTcRingMinRows). The twin test reaches both to compare
// them bit for bit. A plain header, so host-compiled tests can call it.
#pragma once
#include "kernels/ops.h"

namespace dsv4::cuda {

enum class TcGemvKernel { automatic, tc, ring };

// `automatic` takes the ring from this many rows, gemv_tc below. dsv4-dev-gemv at ceb4662 on
// one H200 (wo_b / wq_b / wo_a): 1 row gemv_tc 12.5-13.0 us, ring 13.9-14.5; 2 rows 13.0-13.8
// vs 15.9-16.9; 4 rows a tie (15.9-16.6 vs 15.6-17.2); 8 rows 25.0-25.3 vs 16.3-18.2. The row
// count is a property of the call, not of a row's data, so a row's bits do not depend on it
// (the two kernels are bitwise equal: R-I3 holds across the switch).
inline constexpr int kTcRingMinRows = 5;

// ops.linear_fp8 / ops.grouped_wo_a (kernels/ops.h) on a CUDA backend with the tensor-core
// shapes on `kernel`. Throw Error naming the backend when `ops` is not the CUDA one.
void linear_fp8_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                     float* y);
void grouped_wo_a_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& wo_a, const float* o, int rows, int groups,
                       bool act_bf16, float* og);

}  // namespace dsv4::cuda
