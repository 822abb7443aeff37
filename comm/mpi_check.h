// MPI_CHECK: every MPI call is checked; a failure prints base/call_failure.h's text (call,
// file, line, rank, host, pid) and aborts the job: MPI carries the failure protocol, so a
// failing MPI cannot carry its own failure (CONVENTIONS.md "Errors").
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
