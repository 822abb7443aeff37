// make_nccl_transport() of a build without CUDA: refuses by name.
#include "comm/nccl_transport.h"
#include "base/error.h"

namespace dsv4 {

bool nccl_transport_built() { return false; }

std::unique_ptr<DataPlane> make_nccl_transport(MpiEndpoint&, int) {
  throw Error("transport: nccl needs a CUDA build of dsv4-stage (set transport: mpi)");
}

}  // namespace dsv4
