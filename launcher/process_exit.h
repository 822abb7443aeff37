// Ending the process from a thread other than the main one (a peer that stopped
// responding, a signal): one line on the rank's logger (stderr before it exists), every
// output still being written removed (launcher/output_files.h), then _Exit. The main
// thread may be anywhere, even inside a blocking MPI call, so nothing waits for it.
#pragma once
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <string>

namespace dsv4 {

// The rank's logger once it exists (the exit line goes there).
void set_exit_logger(int rank, std::shared_ptr<spdlog::logger> log);

// The main thread has logged its exit status and is on its way out (MPI_Finalize, the
// failure protocol's last exchange): an exit_process after this (mpirun's SIGTERM once
// another rank ended first, a late liveness verdict) ends with that code and logs nothing,
// so a rank's log states one exit status.
void note_exit_decided(int code);

// level: spdlog level of the line (error for a failure, info/debug for an interruption).
// `linger`: how long to wait after the line before exiting.
[[noreturn]] void exit_process(int code, spdlog::level::level_enum level, const std::string& line);
[[noreturn]] void exit_process(int code, std::chrono::milliseconds linger,
                               spdlog::level::level_enum level, const std::string& line);

}  // namespace dsv4
