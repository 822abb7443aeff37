// The NCCL data plane (`transport: nccl`, the default with `backend: cuda`): payloads
// move GPU to GPU with ncclSend/ncclRecv; MPI bootstraps the communicator (rank 0's
// unique id is broadcast over MPI) and keeps watching for failed peers while NCCL
// waits, so a dead rank never leaves its neighbour hanging.
#pragma once
#include <memory>

#include "comm/data_plane.h"

namespace dsv4 {

bool nccl_transport_built();
// Collective over ep's communicator: every rank calls it once at start-up, after
// selecting `device`. Throws Error on a build without NCCL.
std::unique_ptr<DataPlane> make_nccl_transport(MpiEndpoint& ep, int device);

}  // namespace dsv4
