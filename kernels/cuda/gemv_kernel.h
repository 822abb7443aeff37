// Which tensor-core GEMV computes an FP8 linear of 8 MiB and more (linear.cuh): the engine
// runs `shipped`, the cp.async ring (gemv_tc_ring.cuh); `tc` is the register-prefetch
// kernel (gemv_tc.cuh) whose arithmetic the ring feeds, so the two give the same bits. The
// twin test reaches both to compare them bit for bit. A plain header, so host-compiled
// tests can call it.
#pragma once
#include "kernels/ops.h"

namespace dsv4::cuda {

enum class TcGemvKernel { shipped, tc };

// ops.linear_fp8 / ops.grouped_wo_a (kernels/ops.h) on a CUDA backend with the tensor-core
// shapes on `kernel`. Throw Error naming the backend when `ops` is not the CUDA one.
void linear_fp8_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                     float* y);
void grouped_wo_a_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& wo_a, const float* o, int rows, int groups,
                       bool act_bf16, float* og);

}  // namespace dsv4::cuda
