// SPECDECODE.md §7 G2/G3 on the CUDA backend (issue 6 item 6): the batched verify of T
// rows equals T single decode steps bit for bit on the GPU, and commit(n) leaves every
// cache class equal to n plain steps (law 4), for T = 1..B+1 over a whole sequence.
#include <doctest/doctest.h>

#include "tests/unit/stage/verify_commit_walk.h"

TEST_CASE("CUDA G2/G3: verify equals T plain steps and commit(n) equals n plain steps (law 4)") {
  auto ops = dsv4::make_cuda_ops(0);
  MESSAGE("CUDA verify/commit rounds checked: " << dsv4::test::verify_commit_walk(*ops));
}
