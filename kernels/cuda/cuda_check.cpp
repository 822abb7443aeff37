#include "kernels/cuda/cuda_check.h"

#include <cstdlib>

#include "base/error.h"
#include "base/host.h"

namespace dsv4 {

namespace {

// The launcher's rank as the MPI launcher exports it, or "?" outside mpirun.
std::string rank_name() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return v;
  return "?";
}

}  // namespace

void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(cat("cuda: ", call, " failed: ", cudaGetErrorName(err), " (",
                  cudaGetErrorString(err), ") at ", file, ":", line, " on rank ", rank_name(),
                  " host ", host_name()));
}

}  // namespace dsv4
