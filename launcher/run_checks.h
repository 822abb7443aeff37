// The run config against the model, right after config.json and the index are read and
// before any weight is (issue 17, ARCHITECTURE.md law 6): the request's admission (prompt
// and stop ids in [0, vocab_size), prompt + max_new within max_seq), max_seq within
// max_position_embeddings, and a speculative run's needs (the drafter exists, spec_depth
// within dspark_block_size + 1). Throws Error naming the key and the config.json field.
#pragma once
#include "launcher/run_config.h"
#include "model/checkpoint.h"

namespace dsv4 {

void check_run_against_model(const RunConfig& c, const Checkpoint& ckpt);

}  // namespace dsv4
