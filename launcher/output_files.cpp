#include "launcher/output_files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "base/error.h"

namespace dsv4 {

namespace fs = std::filesystem;

namespace {
std::mutex partial_mutex;
std::set<std::string>& partial_files() {
  static std::set<std::string> files;
  return files;
}

std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Creates and removes a probe file in `dir`: the folder accepts new files.
void probe_writable(const std::string& dir, const std::string& what, const std::string& target) {
  const std::string probe = cat(dir, "/.dsv4-probe-", ::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) throw Error(cat(what, " ", target, ": cannot create files in ", dir, ": ", std::strerror(errno)));
  const bool written = std::fputc('x', f) != EOF && std::fflush(f) == 0;
  const int err = errno;
  std::fclose(f);
  std::remove(probe.c_str());
  if (!written) throw Error(cat(what, " ", target, ": cannot write in ", dir, ": ", std::strerror(err)));
}
}  // namespace

void prepare_output_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);  // several ranks may race here; the check below decides
  if (!fs::is_directory(dir)) throw Error(cat(what, " ", dir, ": not a folder and cannot be created",
                                              ec ? cat(" (", ec.message(), ")") : ""));
  probe_writable(dir, what, dir);
}

void prepare_output_file(const std::string& path, const std::string& what) {
  const std::string dir = folder_of(path);
  if (!fs::is_directory(dir)) throw Error(cat(what, " ", path, ": the folder ", dir, " does not exist"));
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (fs::exists(status)) {
    if (!fs::is_regular_file(status))
      throw Error(cat(what, " ", path, ": exists and is not a regular file (the output is "
                      "written to a temporary file and renamed over it)"));
    if (!fs::remove(path, ec))
      throw Error(cat(what, " ", path, ": cannot remove the previous file: ", ec.message()));
  }
  probe_writable(dir, what, path);
}

std::string begin_partial_output(const std::string& path) {
  static std::atomic<int> counter{0};
  const std::string temp = cat(path, ".partial-", ::getpid(), "-", counter++);
  std::lock_guard<std::mutex> lock(partial_mutex);
  partial_files().insert(temp);
  return temp;
}

void abandon_partial_output(const std::string& temp) {
  std::remove(temp.c_str());
  std::lock_guard<std::mutex> lock(partial_mutex);
  partial_files().erase(temp);
}

void commit_partial_output(const std::string& temp, const std::string& path,
                           const std::string& what) {
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    abandon_partial_output(temp);
    throw Error(cat(what, " ", path, ": cannot rename the complete file into place: ", why));
  }
  std::lock_guard<std::mutex> lock(partial_mutex);
  partial_files().erase(temp);
}

void write_file_atomically(const std::string& path, const std::string& bytes,
                           const std::string& what) {
  const std::string temp = begin_partial_output(path);
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (!f) {
    const std::string why = std::strerror(errno);
    abandon_partial_output(temp);
    throw Error(cat(what, " ", path, ": cannot open for writing: ", why));
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  const int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    abandon_partial_output(temp);
    throw Error(cat(what, " ", path, ": write failed: ", std::strerror(err)));
  }
  commit_partial_output(temp, path, what);
}

void remove_partial_outputs() {
  // Called on the way out, possibly while the main thread writes: no lock is taken
  // twice, and a file created after this runs dies with the process unrenamed.
  std::unique_lock<std::mutex> lock(partial_mutex, std::try_to_lock);
  for (const std::string& temp : partial_files()) std::remove(temp.c_str());
}

}  // namespace dsv4
