// Which kernel computes the decode MoE's routed experts (CudaOps::moe, MODEL.md §4.23):
// the shipped expert_mma_kernel (kernels/cuda/moe.cu) or the staged kernel
// (kernels/cuda/moe_decode.cu: the weight runs stream through a per-warp cp.async ring of
// 3 or 4 slots, across work items; staged4_placed also decodes the e2m1 codes by placing
// their bits, expert_mma.cuh). All feed the same products in the same K order, so they
// give the same bits on every input. The engine runs the shipped kernel: on an H200 the
// staged ones took 15-19% longer at 1 row (bench/RESULTS.md "Sixth session"); the dev bench
// (bench/dev/moe_variants.cu) and the twin test select another, process-wide, to compare it
// bit for bit. Plain C++: the host-compiled tests include it.
#pragma once

namespace dsv4::cuda {

// The shipped kernel's variants (moe_experts.cuh MmaKnobs; moe.cu maps each to its
// knobs): ahead3 / ahead4 load 3 / 4 chunks a warp before multiplying (2 shipped);
// pipelined1 / pipelined2 load a warp's next group of 1 / 2 chunks before multiplying the
// current one, across work items; placed decodes the codes by placing their bits;
// occupancy asks the compiler for one more resident block per SM (fewer registers);
// pipelined1_placed / pipelined1_occupancy combine them. The shipped kernel and its
// variants come first, the staged kernels last (moe.cu walks the values up to staged3).
enum class ExpertKernel {
  shipped,
  ahead3,
  ahead4,
  pipelined1,
  pipelined2,
  placed,
  occupancy,
  pipelined1_placed,
  pipelined1_occupancy,
  staged3,
  staged4,
  staged4_placed
};

// Whether `kernel` is a staged kernel (moe_decode.cu), not the shipped one or its variants.
constexpr bool is_staged(ExpertKernel kernel) {
  return kernel == ExpertKernel::staged3 || kernel == ExpertKernel::staged4 || kernel == ExpertKernel::staged4_placed;
}

// The kernel later CudaOps::moe calls launch (a call whose weights or activations are not
// 16-byte aligned runs the shipped kernel instead of a staged one: those copy 16-byte runs).
void use_expert_kernel(ExpertKernel kernel);
ExpertKernel expert_kernel();

}  // namespace dsv4::cuda
