// One family for failed calls into CUDA, cuBLAS, NCCL and MPI (CONVENTIONS.md "Errors",
// nccl-tests' CUDACHECK / NCCLCHECK pattern): the message names the library, the call,
// the library's error text, file:line, and where it happened — rank, host and pid — so
// one line from a multi-host job says everything.
// CUDA and NCCL failures throw CallFailed, a dsv4::Error: the launcher logs it once and
// runs the failure protocol (every rank exits non-zero, none hangs). An MPI failure uses
// the same text but aborts the job (comm/mpi_check.h): MPI carries the failure protocol,
// so a failing MPI cannot carry its own failure.
#pragma once
#include <unistd.h>

#include <string>

#include "base/error.h"
#include "base/host.h"

namespace dsv4 {

class CallFailed : public Error {
 public:
  using Error::Error;
};

// This process's rank, set once by the launcher after MPI_Init (-1 before: "rank ?").
inline int g_process_rank = -1;
inline void set_process_rank(int rank) { g_process_rank = rank; }

inline std::string call_failure_text(const char* library, const char* call,
                                     const std::string& what, const char* file, int line) {
  return cat(library, " call ", call, " failed: ", what, " at ", file, ":", line, " on rank ",
             g_process_rank >= 0 ? std::to_string(g_process_rank) : std::string("?"),
             " (host ", host_name(), ", pid ", static_cast<long>(getpid()), ")");
}

[[noreturn]] inline void call_failed(const char* library, const char* call,
                                     const std::string& what, const char* file, int line) {
  throw CallFailed(call_failure_text(library, call, what, file, line));
}

}  // namespace dsv4
