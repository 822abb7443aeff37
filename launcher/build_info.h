// What this binary is, for --version and the first line of every rank's log: the source
// revision (`git describe` at build time, cmake/git_revision.cmake) and whether the CUDA
// backend is built in.
#pragma once
#include <string>

namespace dsv4 {

const char* build_revision();  // e.g. "742e8ca" or "742e8ca-dirty"; "unknown" without git
std::string version_text();    // "dsv4-stage <revision> (CUDA backend: built|not built)"

}  // namespace dsv4
