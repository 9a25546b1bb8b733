#!/usr/bin/env bash
# The guard against the next slowdown: this tree's `toolcell` beside the one built from an
# earlier commit, in the same run on the same machine, for echo in process (`toolcell bench`),
# served over stdio and over HTTP (the `calls` bench with TOOLCELL_BENCH_BASELINE).
#
#   just bench-against 19f245e
#
# The earlier commit is built once, in a worktree under target/bench-against/COMMIT with its own
# target directory (a full build: about 10 minutes on 2 cores), and kept for the next run.
# Rounds alternate between the two binaries, so both see the same machine; compare ratios
# within a run, never figures across runs (BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short=12 "${1:?usage: bench-against.sh COMMIT}")
rounds=${ROUNDS:-3}
calls=${CALLS:-20000}
dir=target/bench-against/$commit
if [ ! -x "$dir/toolcell" ]; then
  rm -rf "$dir/src"
  mkdir -p "$dir"
  git worktree add --force --detach "$dir/src" "$commit" >/dev/null
  # A commit after the CLI's features split builds them all (the HTTP case needs `http`).
  features=()
  if grep -q '^full = ' "$dir/src/runtime/cli/Cargo.toml" 2>/dev/null; then
    features=(--features full)
  fi
  (cd "$dir/src" && cargo build --release --locked "${features[@]}" --target-dir "$PWD/../target")
  cp "$dir/target/release/toolcell" "$dir/toolcell"
  git worktree remove --force "$dir/src"
fi
cargo build --release --features full
baseline=$dir/toolcell
current=target/release/toolcell

echo "echo in process (toolcell bench, $calls calls a round), $commit against this tree"
echo
echo "| round | $commit p50 µs | this tree p50 µs | ratio |"
echo "|---:|---:|---:|---:|"
p50() { "$1" bench echo '{"text":"hi"}' --calls "$calls" --json | sed -E 's/.*"p50_us":([0-9.]+).*/\1/'; }
for round in $(seq 1 "$rounds"); do
  before=$(p50 "$baseline")
  after=$(p50 "$current")
  echo "| $round | $before | $after | $(awk "BEGIN { printf \"%.2f\", $after / $before }")x |"
done
echo
TOOLCELL_BENCH_BASELINE="$PWD/$baseline" cargo bench --workspace --bench calls -- "served over MCP"
