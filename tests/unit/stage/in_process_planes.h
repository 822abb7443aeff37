// The control and data planes of a pipeline whose ranks all live in this process, the
// stand-in for comm's MPI planes (comm/control_plane.h, comm/data_plane.h) that lets the
// stage tests drive every rank's real Pipeline (stage/pipeline.h).
//
// The ranks run one after the other in one thread, not in threads of their own (our
// choice: the stages share one backend, its weight cache and the tests' counting Ops
// decorators, none of them thread-safe, and a sequence makes every run deterministic).
// Rank 0 queues each header for the ranks > 0 and runs its part; the ranks > 0 run their
// queued headers in rank order when rank 0 waits for the head's result (recv_result) and
// when the owner calls run_pending() after rank 0's part. So every rank finds its
// boundary rows already sent by the rank before it; a wait that nothing can fill throws
// an Error naming the ranks (where MPI would hang or throw PeerFailed), and an error of
// any rank reaches rank 0's caller. A rank acting outside its role is a bug (DSV4_CHECK).
// Rows cross as backend-to-backend copies, as a device-pointer transport moves them.
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/error.h"
#include "comm/control_plane.h"
#include "comm/data_plane.h"
#include "kernels/ops.h"

namespace dsv4::test {

class InProcessPlanes {
 public:
  using RankPart = std::function<void(const OpHeader&)>;  // a rank's Pipeline::execute

  InProcessPlanes(Ops& ops, int n_ranks)
      : ops_(ops), parts_(static_cast<size_t>(n_ranks)), headers_(parts_.size()),
        rows_(parts_.size()) {
    DSV4_CHECK(n_ranks >= 2, "in-process planes join 2 or more ranks, not ", n_ranks);
    for (int r = 0; r < n_ranks; ++r) {
      controls_.push_back(std::make_unique<Control>(*this, r));
      datas_.push_back(std::make_unique<Data>(*this, r));
    }
  }

  // What rank r (> 0) does with each header it receives.
  void attach(int rank, RankPart part) { parts_.at(static_cast<size_t>(rank)) = std::move(part); }
  ControlPlane& control(int rank) { return *controls_.at(static_cast<size_t>(rank)); }
  DataPlane& data(int rank) { return *datas_.at(static_cast<size_t>(rank)); }

  // Every rank > 0 runs its queued headers, rank by rank.
  void run_pending() {
    for (size_t r = 1; r < parts_.size(); ++r) {
      while (!headers_[r].empty()) {
        const OpHeader h = take_header(static_cast<int>(r));
        DSV4_CHECK(parts_[r], "rank ", r, " has no pipeline attached");
        parts_[r](h);
      }
    }
  }

 private:
  struct Rows {  // one boundary payload in flight, in backend memory
    FBuf h, taps;
  };

  class Control final : public ControlPlane {
   public:
    Control(InProcessPlanes& p, int rank) : p_(p), rank_(rank) {}
    void send_header(const OpHeader& h) override {
      DSV4_CHECK(rank_ == 0, "only rank 0 sends operation headers");
      for (size_t r = 1; r < p_.headers_.size(); ++r) p_.headers_[r].push_back(h);
    }
    OpHeader recv_header() override { return p_.take_header(rank_); }
    void send_result(const OpResult& res) override {
      DSV4_CHECK(rank_ == p_.head(), "only the head rank returns results");
      DSV4_CHECK(!p_.result_, "the head rank sends a result before rank 0 took the last one");
      p_.result_ = res;
    }
    OpResult recv_result() override {
      DSV4_CHECK(rank_ == 0, "only rank 0 receives results");
      p_.run_pending();
      if (!p_.result_)
        throw Error(cat("rank 0 waits for a result the head rank ", p_.head(), " never sent"));
      OpResult res = std::move(*p_.result_);
      p_.result_.reset();
      return res;
    }

   private:
    InProcessPlanes& p_;
    int rank_;
  };

  class Data final : public DataPlane {
   public:
    Data(InProcessPlanes& p, int rank) : p_(p), rank_(rank) {}
    const char* name() const override { return "in-process"; }
    void send(int dst, const BoundaryPayload& pl) override {
      DSV4_CHECK(dst == rank_ + 1 && dst <= p_.head(), "rank ", rank_, " sends rows to rank ",
                 dst, " (only to the next rank)");
      Rows rows;
      rows.h = p_.backend_copy(pl.h, pl.h_floats);
      if (pl.taps) rows.taps = p_.backend_copy(pl.taps, pl.tap_floats);
      p_.rows_[static_cast<size_t>(dst)].push_back(std::move(rows));
    }
    void recv(int src, const BoundaryPayload& pl) override {
      auto& queue = p_.rows_[static_cast<size_t>(rank_)];
      DSV4_CHECK(src == rank_ - 1, "rank ", rank_, " receives rows from rank ", src,
                 " (only from the previous rank)");
      if (queue.empty()) throw Error(cat("rank ", rank_, " waits for rows rank ", src, " never sent"));
      Rows rows = std::move(queue.front());
      queue.pop_front();
      DSV4_CHECK(rows.h.size() == pl.h_floats && rows.taps.size() == (pl.taps ? pl.tap_floats : 0),
                 "rank ", rank_, " expects h of ", pl.h_floats, " and taps of ", pl.tap_floats,
                 " floats, rank ", src, " sent ", rows.h.size(), " and ", rows.taps.size());
      p_.ops_.copy(pl.h, rows.h.data(), pl.h_floats);
      if (pl.taps) p_.ops_.copy(pl.taps, rows.taps.data(), pl.tap_floats);
    }

   private:
    InProcessPlanes& p_;
    int rank_;
  };

  int head() const { return static_cast<int>(parts_.size()) - 1; }
  OpHeader take_header(int rank) {
    auto& queue = headers_.at(static_cast<size_t>(rank));
    DSV4_CHECK(rank > 0, "rank 0 receives no headers");
    if (queue.empty()) throw Error(cat("rank ", rank, " waits for a header rank 0 never sent"));
    OpHeader h = std::move(queue.front());
    queue.pop_front();
    return h;
  }
  FBuf backend_copy(const float* src, size_t n) {
    FBuf buf = ops_.alloc(n);
    ops_.copy(buf.data(), src, n);
    return buf;
  }

  Ops& ops_;
  std::vector<RankPart> parts_;
  std::vector<std::deque<OpHeader>> headers_;  // per rank: sent, not yet run
  std::vector<std::deque<Rows>> rows_;         // per rank: rows sent to it, not yet received
  std::optional<OpResult> result_;             // the head's result, until rank 0 takes it
  std::vector<std::unique_ptr<Control>> controls_;
  std::vector<std::unique_ptr<Data>> datas_;
};

}  // namespace dsv4::test
