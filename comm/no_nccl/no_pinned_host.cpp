// alloc_pinned_floats() of a build without CUDA: refuses by name (only a CUDA backend
// stages device payloads).
#include "base/error.h"
#include "comm/device_staging.h"

namespace dsv4 {

std::shared_ptr<float> alloc_pinned_floats(size_t) {
  throw Error("transport mpi: pinned host staging needs a CUDA build of dsv4-stage");
}

}  // namespace dsv4
