// The last-block idiom of a kernel that reduces and then finishes in one launch (issue 12:
// a decode step's launches): every block publishes its partials, takes a ticket, and the
// block whose ticket is the grid's last finishes from all of them (CUDA C++ Programming
// Guide, "Memory Fence Functions": the sum of an array in one launch). Which block ends
// last varies from run to run; what it computes does not (it reads every partial in the
// fixed order its caller writes), so the bits are those of a second kernel's.
#pragma once
#include <cuda_runtime.h>

namespace dsv4::cuda {

// Called by every thread of every block once its partials are written (after pdl_wait).
// True, in every thread of the block, for the one block that takes the last of `blocks`
// tickets; that block then sees every other block's writes, and has reset *ticket to 0
// for the next launch (a kernel after this one in the stream touches it only after its
// own pdl_wait, i.e. once this grid is complete). Each concurrent line of a step needs its
// own counter (CudaOps::ticket).
__device__ inline bool last_block_done(unsigned* ticket, unsigned blocks) {
  __shared__ bool last;
  __threadfence();  // this thread's partials reach device scope before the ticket below
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(ticket, 1u) == blocks - 1;
    if (last) *ticket = 0;  // every block has taken its ticket
  }
  __syncthreads();
  if (last) __threadfence();  // the other blocks' partials are read after their tickets
  return last;
}

}  // namespace dsv4::cuda
