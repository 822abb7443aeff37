#!/usr/bin/env bash
# `dsv4-stage --serve` at mpirun -np 2 on the tiny model under the npm `openai` client
# (openai_client.mjs), over loopback; then SIGTERM drains and stops every rank.
#   serve_openai.sh DSV4_STAGE DSV4_TOKENIZE TINY_DIR CONFIGS NPM_DIR WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
stage=$1 tokenize=$2 tiny=$3 configs=$4 npm_dir=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
"$root/tests/tokenizer/npm_install.sh" "$npm_dir" openai@6
prompt="Hello"
max_tokens=8

# The command line's greedy tokens for the prompt's ids, decoded: what the server must say.
ids=$("$tokenize" --tokenizer "$tiny" --bos --encode "$prompt" | tr -d '[] ')
"$root/scripts/mpirun.sh" -np 2 "$stage" --config "$configs/tiny.yaml" --model "$tiny" \
  --prompt-ids "$ids" --max-new "$max_tokens" > "$work/cli.out" 2> "$work/cli.err"
tokens=$(sed -n 's/^tokens: //p' "$work/cli.out")
[ -n "$tokens" ] || { echo "no tokens from the CLI run"; cat "$work/cli.err"; exit 1; }
"$tokenize" --tokenizer "$tiny" --skip-special --decode "$tokens" > "$work/cli.text"
node -e 'const fs = require("fs"); const [p, n, f] = process.argv.slice(1);
  const t = fs.readFileSync(f, "utf8").replace(/\n$/, "");
  fs.writeFileSync(process.argv[4], JSON.stringify({prompt: p, max_tokens: Number(n), text: t}));' \
  "$prompt" "$max_tokens" "$work/cli.text" "$work/expected.json"
# The text run of the command line says the same.
"$root/scripts/mpirun.sh" -np 2 "$stage" --config "$configs/tiny.yaml" --model "$tiny" \
  --prompt "$prompt" --max-new "$max_tokens" --ignore-eos > "$work/cli_text.out" 2>> "$work/cli.err"
cmp <(printf '%s\n' "$(cat "$work/cli.text")") "$work/cli_text.out" ||
  { echo "FAIL --prompt text differs from the decoded --prompt-ids tokens"; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$root/scripts/mpirun.sh" -np 2 "$stage" --config "$configs/tiny.yaml" --model "$tiny" \
  --serve --host 127.0.0.1 --port "$port" --log-dir "$work/logs" > "$work/serve.out" \
  2> "$work/serve.err" &
mpirun_pid=$!
cleanup() { kill -KILL "$mpirun_pid" 2>/dev/null || true; }
trap cleanup EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 1 300); do  # up to 60 s for the ranks to load
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/health" || true)
  [ "$code" = 200 ] && break
  kill -0 "$mpirun_pid" 2>/dev/null || { echo "the server exited"; cat "$work/serve.err"; exit 1; }
  sleep 0.2
done
[ "$code" = 200 ] || { echo "the server never became ready"; cat "$work/serve.err"; exit 1; }

status=0
(cd "$npm_dir" && timeout 240 node "$here/openai_client.mjs" "$base" tiny "$work/expected.json") || status=1

# SIGTERM to rank 0 (as a service manager sends it) drains and stops every rank, exit 0.
# (mpirun forwards a SIGTERM sent to itself the same way, but then exits 1 by its rules.)
rank0_pid=$(sed -n 's/.* pid \([0-9]*\)$/\1/p' "$work/logs/rank0.log" | head -n 1)
[ -n "$rank0_pid" ] || { echo "FAIL no pid in $work/logs/rank0.log"; exit 1; }
kill -TERM "$rank0_pid"
for _ in $(seq 1 150); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$mpirun_pid" 2>/dev/null; then echo "FAIL the server did not stop within 30 s of SIGTERM"; exit 1; fi
wait "$mpirun_pid" && rc=0 || rc=$?
trap - EXIT
grep -q "server stopped; every rank is leaving" "$work/serve.err" &&
  echo "ok   SIGTERM drained and stopped the ranks (exit status $rc)" ||
  { echo "FAIL no clean stop in the log (exit status $rc)"; cat "$work/serve.err"; status=1; }
[ "$rc" = 0 ] || { echo "FAIL exit status $rc after SIGTERM"; status=1; }
exit $status
