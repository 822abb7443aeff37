// Shared by the libFuzzer targets (tests/fuzz, docs/fuzzing.md): a fuzzer's bytes as a
// file (the readers under test take paths: they mmap or stream real files), in a
// per-process scratch folder on /dev/shm (or the temp folder). Only dsv4::Error is an
// accepted outcome: any other exception, a crash or a sanitizer report is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace dsv4::fuzz {

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    const auto d = base / ("dsv4_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace dsv4::fuzz
