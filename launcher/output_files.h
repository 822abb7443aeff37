// Output files of a run (--dump-logits, --spec-stats, --dump-boundary, --log-dir; issue 17
// item 4): checked writable at start-up, so a bad path stops the run before any work; and
// written to a temporary name in the same folder, renamed over the target only when
// complete, so a failed or interrupted run leaves no partial file and no stale file is
// taken for this run's (a previous run's file at the path is removed at start-up).
#pragma once
#include <string>

namespace dsv4 {

// Start-up check of a file the run will write: its folder exists (or is created) and
// accepts a new file; an existing target must be a regular file, and is removed. Throws
// Error naming `what` (the flag or key) and the path.
void prepare_output_file(const std::string& path, const std::string& what);
// The same for a folder the run writes files into (created when missing).
void prepare_output_dir(const std::string& dir, const std::string& what);

// Writes `bytes` to `path` through a temporary file renamed when complete; throws Error
// naming `what` and the path (the temporary is removed on failure).
void write_file_atomically(const std::string& path, const std::string& bytes,
                           const std::string& what);

// Temporaries being written right now, removed by exit_process (launcher/process_exit.h).
void remove_partial_outputs();
// A temporary name for `path` (same folder, unique per process) registered until
// released; write_file_atomically uses it, so does the boundary dump writer.
std::string begin_partial_output(const std::string& path);
// Renames the complete temporary over `path` (Error naming `what` on failure) and
// releases it; abandon_partial_output removes it instead.
void commit_partial_output(const std::string& temp, const std::string& path,
                           const std::string& what);
void abandon_partial_output(const std::string& temp);

}  // namespace dsv4
