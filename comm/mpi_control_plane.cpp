// The control plane over MPI (comm/control_plane.h): each header and result is one byte
// message on its tag; every wait goes through the endpoint, so it throws PeerFailed when
// another rank fails meanwhile (comm/error_broadcast.cpp).
#include "base/error.h"
#include "comm/control_plane.h"
#include "comm/mpi_endpoint.h"

namespace dsv4 {

namespace {
class MpiControlPlane final : public ControlPlane {
 public:
  explicit MpiControlPlane(MpiEndpoint& ep) : ep_(ep) {}

  void send_header(const OpHeader& h) override {
    DSV4_CHECK(ep_.rank() == 0, "only rank 0 sends operation headers");
    const auto bytes = encode_header(h);
    for (int r = 1; r < ep_.size(); ++r) ep_.send_message(r, kTagHeader, bytes);
  }
  OpHeader recv_header() override { return decode_header(ep_.recv_message(0, kTagHeader)); }

  void send_result(const OpResult& res) override {
    DSV4_CHECK(ep_.rank() == head_rank(), "only the head rank returns results");
    ep_.send_message(0, kTagResult, encode_result(res));
  }
  OpResult recv_result() override {
    return decode_result(ep_.recv_message(head_rank(), kTagResult));
  }

 private:
  int head_rank() const { return ep_.size() - 1; }

  MpiEndpoint& ep_;
};
}  // namespace

std::unique_ptr<ControlPlane> make_mpi_control_plane(MpiEndpoint& ep) {
  return std::make_unique<MpiControlPlane>(ep);
}

}  // namespace dsv4
