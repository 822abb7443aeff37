// NCCL data plane (comm/nccl_transport.h). Each send/recv is one NCCL group on the
// transport's own stream; the wait polls the stream and the MPI error tag in turn, and
// aborts the communicator when a peer announced a failure.
#include "comm/nccl_transport.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/mpi_check.h"
#include "base/call_failure.h"
#include "base/cuda_check.h"

namespace dsv4 {

namespace {

// Failed calls throw CallFailed (base/call_failure.h): the failure protocol reports them.
#define NCCL_CHECK(call)                                                            \
  do {                                                                              \
    ncclResult_t nccl_check_rc_ = (call);                                           \
    if (nccl_check_rc_ != ncclSuccess && nccl_check_rc_ != ncclInProgress)          \
      call_failed("NCCL", #call, ncclGetErrorString(nccl_check_rc_), __FILE__, __LINE__); \
  } while (0)

class NcclTransport final : public DataPlane {
 public:
  NcclTransport(MpiEndpoint& ep, int device) : ep_(ep), device_(device) {
    DSV4_CUDA_CHECK(cudaSetDevice(device_));
    ncclUniqueId id;
    if (ep_.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, ep_.comm()));
    NCCL_CHECK(ncclCommInitRank(&comm_, ep_.size(), id, ep_.rank()));
    DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclTransport() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "nccl"; }

  void send(int dst, const BoundaryPayload& p) override {
    // The payload was produced on the compute stream: make it complete first.
    DSV4_CUDA_CHECK(cudaDeviceSynchronize());
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(p.h, p.h_floats, ncclFloat32, dst, comm_, stream_));
    if (p.taps) NCCL_CHECK(ncclSend(p.taps, p.tap_floats, ncclFloat32, dst, comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    wait();
  }
  void recv(int src, const BoundaryPayload& p) override {
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclRecv(p.h, p.h_floats, ncclFloat32, src, comm_, stream_));
    if (p.taps) NCCL_CHECK(ncclRecv(p.taps, p.tap_floats, ncclFloat32, src, comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    wait();
  }

 private:
  // Polls the stream; between polls, a peer's failure announcement aborts the NCCL
  // communicator (so no kernel keeps waiting for a dead peer) and throws PeerFailed.
  void wait() {
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) DSV4_CUDA_CHECK(q);
      try {
        ep_.check_peer_failure();
      } catch (const PeerFailed&) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw;
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  MpiEndpoint& ep_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

bool nccl_transport_built() { return true; }

std::unique_ptr<DataPlane> make_nccl_transport(MpiEndpoint& ep, int device) {
  return std::make_unique<NcclTransport>(ep, device);
}

}  // namespace dsv4
