#!/usr/bin/env bash
# Installs npm packages into DIR/node_modules unless they are all there already (tests
# that drive HF tokenizers or the openai client; never a global install).
#   npm_install.sh DIR PACKAGE@VERSION...
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
missing=0
for p in "$@"; do
  name=${p%@*}
  [ -f "$dir/node_modules/$name/package.json" ] || missing=1
done
[ "$missing" = 0 ] && exit 0
command -v npm >/dev/null || { echo "npm_install: npm is missing (scripts/setup.sh installs it)" >&2; exit 1; }
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
# One install at a time per folder (ctest runs tests in parallel).
exec 9>"$dir/.install.lock"
flock 9
(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$@" >&2)
