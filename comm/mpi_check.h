// MPI_CHECK: every MPI call is checked; a failure aborts with the call, file, line,
// rank and host (CONVENTIONS.md "Errors", nccl-tests' pattern). An MPI failure is an
// environment fault, not bad input, so it is not a dsv4::Error.
#pragma once
#include <mpi.h>

namespace dsv4 {
[[noreturn]] void mpi_call_failed(const char* call, int code, const char* file, int line);
}  // namespace dsv4

#define MPI_CHECK(call)                                                          \
  do {                                                                           \
    int mpi_check_rc_ = (call);                                                  \
    if (mpi_check_rc_ != MPI_SUCCESS)                                            \
      ::dsv4::mpi_call_failed(#call, mpi_check_rc_, __FILE__, __LINE__);         \
  } while (0)
