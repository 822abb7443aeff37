// DIR/run.json of a --dump-boundary run: the run settings a stage replay must share with
// the dumped run to reproduce it exactly (numerics, max_seq, drafter, spec_depth), so
// `--stage-only R --replay DIR` can refuse a different setting by name instead of
// reporting differences it caused itself. Written by rank 0 before the first operation:
//   {"format": "dsv4-boundary-dump/1", "n_ranks": P,
//    "settings": {"numerics.kv_quant": "clamp", ..., "max_seq": "256",
//                 "drafter": "dspark", "spec_depth": "6"}}
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "launcher/run_config.h"

namespace dsv4 {

using ReplaySettings = std::vector<std::pair<std::string, std::string>>;  // (key, value)

// The settings of a run as (run-config key, value), in a fixed order; max_seq is the
// effective one (RunConfig::effective_max_seq).
ReplaySettings replay_settings(const RunConfig& c, int64_t max_seq);

std::string dump_manifest_file(const std::string& dir);
// Writes DIR/run.json (through a temporary name, renamed when complete).
void write_dump_manifest(const std::string& dir, int n_ranks, const ReplaySettings& settings);
// Reads DIR/run.json; throws Error naming the file and the field.
ReplaySettings read_dump_manifest(const std::string& dir);
// Throws Error naming the first key whose value differs between the dump and this run.
void check_replay_settings(const std::string& dir, const ReplaySettings& dumped,
                           const ReplaySettings& here);

}  // namespace dsv4
