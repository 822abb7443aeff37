// make_cuda_ops() of a build without the CUDA backend: refuses by name (issue 5, item 5).
#include "kernels/ops.h"
#include "base/error.h"

namespace dsv4 {

bool cuda_backend_built() { return false; }
int cuda_devices_visible() { return 0; }

std::unique_ptr<Ops> make_cuda_ops(int, bool, bool) {
  throw Error(
      "backend: cuda was requested but this dsv4-stage was built without CUDA "
      "(configure on a machine with nvcc, or set backend: cpu)");
}

}  // namespace dsv4
