// One exception type for bad input (checkpoint, config, request, flag), and one
// macro for violated internal invariants (CONVENTIONS.md "Errors").
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dsv4 {

// Bad input: the message names the culprit (file, tensor, field, flag, rank, layer,
// position). The launcher catches it, logs it, tells the other ranks, exits non-zero.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds a message from streamable parts: throw Error(cat("tensor ", name, ": bad"));
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

[[noreturn]] inline void invariant_failed(const char* file, int line, const char* cond,
                                          const std::string& detail) {
  std::fprintf(stderr, "internal invariant violated at %s:%d: %s %s\n", file, line, cond,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace dsv4

// A bug, never bad input: aborts with file:line and the values involved.
#define DSV4_CHECK(cond, ...)                                                       \
  do {                                                                              \
    if (!(cond)) ::dsv4::invariant_failed(__FILE__, __LINE__, #cond,                \
                                          ::dsv4::cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
