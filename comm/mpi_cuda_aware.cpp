#include <mpi.h>

#include "comm/device_staging.h"
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT and MPIX_Query_cuda_support
#endif

namespace dsv4 {

bool mpi_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

}  // namespace dsv4
