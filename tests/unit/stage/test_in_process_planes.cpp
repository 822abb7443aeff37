// The in-process planes (in_process_planes.h) the stage tests run the real Pipeline
// through: the ranks > 0 run in rank order when rank 0 waits for the head's result or
// the owner runs what is pending; rows cross bitwise; an error of any rank, and a wait
// that nothing can fill, reach rank 0's caller by name instead of hanging.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/unit/stage/in_process_planes.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr size_t kRow = 4;  // floats of the test payload

// Three ranks: rank 1 doubles the rows of row operations and passes them on, rank 2
// (the head) returns them as ids; every rank logs "rank kind".
struct ThreeRanks {
  explicit ThreeRanks(Ops& o) : ops(o), planes(o, 3) {
    planes.attach(1, [this](const OpHeader& h) {
      log.push_back("1 " + std::string(op_kind_name(h.kind)));
      if (h.kind != OpKind::decode) return;
      FBuf rows = ops.alloc(kRow);
      planes.data(1).recv(0, {rows.data(), kRow});
      for (size_t i = 0; i < kRow; ++i) rows.data()[i] *= 2;  // CPU backend: host memory
      planes.data(1).send(2, {rows.data(), kRow});
    });
    planes.attach(2, [this](const OpHeader& h) {
      log.push_back("2 " + std::string(op_kind_name(h.kind)));
      if (h.kind != OpKind::decode) return;
      FBuf rows = ops.alloc(kRow);
      planes.data(2).recv(1, {rows.data(), kRow});
      OpResult r;
      for (size_t i = 0; i < kRow; ++i) r.ids.push_back(static_cast<int32_t>(rows.data()[i]));
      planes.control(2).send_result(r);
    });
  }
  OpHeader header(OpKind kind) {
    OpHeader h;
    h.kind = kind;
    return h;
  }

  Ops& ops;
  InProcessPlanes planes;
  std::vector<std::string> log;
};

}  // namespace

TEST_CASE("in-process planes: ranks run in rank order when rank 0 waits; rows cross bitwise") {
  auto ops = make_cpu_ops();
  ThreeRanks t(*ops);
  t.planes.control(0).send_header(t.header(OpKind::commit));
  CHECK(t.log.empty());  // queued until someone waits or runs what is pending
  t.planes.run_pending();
  CHECK(t.log == std::vector<std::string>{"1 commit", "2 commit"});

  t.planes.control(0).send_header(t.header(OpKind::decode));
  std::vector<float> row{1.5f, -2.0f, 3.0f, 40.0f};
  t.planes.data(0).send(1, {row.data(), kRow});
  row.assign(kRow, 0.0f);  // the planes hold their own copy
  const OpResult r = t.planes.control(0).recv_result();
  CHECK(r.ids == std::vector<int32_t>{3, -4, 6, 80});
  CHECK(t.log == std::vector<std::string>{"1 commit", "2 commit", "1 decode", "2 decode"});
}

TEST_CASE("in-process planes: a rank's error and a wait nothing fills reach rank 0 by name") {
  auto ops = make_cpu_ops();
  SUBCASE("rows never sent") {
    ThreeRanks t(*ops);
    t.planes.control(0).send_header(t.header(OpKind::decode));
    CHECK_THROWS_WITH_AS(t.planes.control(0).recv_result(),
                         doctest::Contains("rank 1 waits for rows rank 0 never sent"), Error);
  }
  SUBCASE("no result") {
    ThreeRanks t(*ops);
    t.planes.control(0).send_header(t.header(OpKind::reset));
    CHECK_THROWS_WITH_AS(t.planes.control(0).recv_result(),
                         doctest::Contains("rank 0 waits for a result the head rank 2 never sent"),
                         Error);
  }
  SUBCASE("an error on rank 2") {
    ThreeRanks t(*ops);
    t.planes.attach(2, [](const OpHeader&) { throw Error("rank 2: NaN in the logits"); });
    t.planes.control(0).send_header(t.header(OpKind::reset));
    CHECK_THROWS_WITH_AS(t.planes.control(0).recv_result(),
                         doctest::Contains("rank 2: NaN in the logits"), Error);
  }
  SUBCASE("no header") {
    ThreeRanks t(*ops);
    CHECK_THROWS_WITH_AS(t.planes.control(1).recv_header(),
                         doctest::Contains("rank 1 waits for a header rank 0 never sent"), Error);
  }
}
