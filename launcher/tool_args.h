// The command-line parse of the small tools (dsv4-mkckpt, dsv4-tokenize,
// dsv4-step-bytes, dsv4-bench-decode): cxxopts errors and stray arguments become an Error naming them;
// --help prints the options.
#pragma once
#include <cxxopts.hpp>
#include <iostream>
#include <optional>

#include "base/error.h"

namespace dsv4 {

// The parsed flags, or none after --help was printed (the tool exits 0).
inline std::optional<cxxopts::ParseResult> parse_tool_args(cxxopts::Options& opts, int argc,
                                                           char** argv) {
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw Error(cat(e.what(), " (see --help)"));
  }
  if (args.count("help")) {
    std::cout << opts.help() << "\n";
    return std::nullopt;
  }
  if (!args.unmatched().empty())
    throw Error(cat("unexpected argument '", args.unmatched().front(), "' (see --help)"));
  return args;
}

// The main() of a small tool: run(argc, argv), or "NAME: error: ..." on stderr and exit 2.
inline int tool_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace dsv4
