// The command-line parse of the small tools (dsv4-mkckpt, dsv4-tokenize,
// dsv4-step-bytes): cxxopts errors and stray arguments become an Error naming them;
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

}  // namespace dsv4
