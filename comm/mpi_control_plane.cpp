// The control plane over MPI (comm/control_plane.h): each header and result is one byte
// message on its tag; every wait goes through the endpoint, so it throws PeerFailed when
// another rank fails meanwhile (comm/error_broadcast.cpp).
#include <memory>

#include "base/error.h"
#include "comm/control_plane.h"
#include "comm/mpi_endpoint.h"

namespace dsv4 {

namespace {
class MpiControlPlane final : public ControlPlane {
 public:
  explicit MpiControlPlane(MpiEndpoint& ep) : ep_(ep) {}

  // Posted, not awaited: rank 0 goes on to its part of the operation (the next prefill
  // chunk) while a rank still busy with the previous chunk takes the header later, so the
  // chunks pipeline across the stages (issue 13; a header of a few thousand ids is past
  // MPI's eager limit and would otherwise wait for that rank). A stop is sent to
  // completion: nothing is left in flight when the ranks finish.
  void send_header(const OpHeader& h) override {
    DSV4_CHECK(ep_.rank() == 0, "only rank 0 sends operation headers");
    const auto bytes = std::make_shared<const std::vector<uint8_t>>(encode_header(h));
    for (int r = 1; r < ep_.size(); ++r) ep_.post_message(r, kTagHeader, bytes);
    if (h.kind == OpKind::stop) ep_.finish_posted();
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
