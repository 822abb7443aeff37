// The one message of a failed CUDA / NCCL / MPI call (base/call_failure.h): library, call,
// error text, file:line, rank, host and pid; CallFailed is the Error the launcher reports.
#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "base/call_failure.h"

TEST_CASE("a failed call names library, call, error, file:line, rank, host and pid") {
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  const std::string where =
      std::string(" (host ") + host + ", pid " + std::to_string(static_cast<long>(getpid())) + ")";
  dsv4::set_process_rank(-1);
  CHECK(dsv4::call_failure_text("NCCL", "ncclSend(...)", "unhandled system error", "t.cpp", 7) ==
        "NCCL call ncclSend(...) failed: unhandled system error at t.cpp:7 on rank ?" + where);
  dsv4::set_process_rank(3);
  const std::string expected =
      "CUDA call cudaMalloc(&p, 8) failed: cudaErrorMemoryAllocation (out of memory) at "
      "f.cu:12 on rank 3" + where;
  CHECK(dsv4::call_failure_text("CUDA", "cudaMalloc(&p, 8)",
                                "cudaErrorMemoryAllocation (out of memory)", "f.cu", 12) == expected);
  // Thrown as a dsv4::Error, which the launcher turns into the failure protocol.
  CHECK_THROWS_WITH_AS(dsv4::call_failed("CUDA", "cudaMalloc(&p, 8)",
                                         "cudaErrorMemoryAllocation (out of memory)", "f.cu", 12),
                       expected.c_str(), dsv4::Error);
  dsv4::set_process_rank(-1);
}
