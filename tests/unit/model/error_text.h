// Test helper: the message of the dsv4::Error a callable throws ("" and a failed check
// when it throws nothing), so tests can assert that refusals name their culprit.
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "base/error.h"

namespace dsv4::test {

template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL_CHECK("expected dsv4::Error, nothing was thrown");
  return "";
}

// True when every part occurs in the message.
template <class... Parts>
bool mentions(const std::string& message, const Parts&... parts) {
  return ((message.find(parts) != std::string::npos) && ...);
}

}  // namespace dsv4::test
