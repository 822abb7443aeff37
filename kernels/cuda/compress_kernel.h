// Which kernels compute a compress_blocks call (MODEL.md §4.16 steps 3-6; kernels/cuda/
// compressor.cu): one_pass, a block pooling and finishing each compressed row in one launch;
// pool_then_finish, the pooling spread over (row, 32-dim chunk) one-warp blocks, then the rows
// finished in place by a second launch (issue 13: a ratio-128 layer's 1,024-token prefill
// has 8 rows, 8 SMs of the one-pass kernel). A dim's pooling and a row's finishing are the
// same operations in both, so they give the same bits; `automatic` is CudaOps::compress_blocks'
// choice (pool_then_finish below 64 blocks, compressor.cu kFewBlocks). The dev bench and the
// twin test reach both. A plain header (host-compiled tests).
#pragma once
#include "kernels/ops.h"

namespace dsv4::cuda {

enum class CompressKernel { automatic, one_pass, pool_then_finish };

// ops.compress_blocks(...) (kernels/ops.h) on a CUDA backend by `kernel`. Throws Error naming
// the backend when `ops` is not the CUDA one.
void compress_blocks_with(Ops& ops, CompressKernel kernel, const CompressorWeights& c, const float* kv,
                          const float* score, int n_blocks, const float* prev_kv, const float* prev_score,
                          int first_block, const RopeTable& rope, double norm_eps, const Numerics& num, float* out);

}  // namespace dsv4::cuda
