#!/usr/bin/env bash
# Instructions per call of the in-process echo cases, counted by valgrind's callgrind: the same
# count for the same binary and inputs whatever else the machine is doing, so a change to the
# call path can be weighed on a shared, noisy machine (BENCHMARKS.md, "Echo in process").
#
#   bash tests/bench-instructions.sh [MICRO_BINARY]
#
# Without an argument it builds the `micro` bench (`cargo bench --workspace --bench micro
# --no-run`). Each case runs twice under callgrind, with 300 and with 1,300 samples of one
# call each (`--sample-size 1`); the difference of the two totals over 1,000 is what one call
# costs, setup and loading cancelled out. The pool has one slot (TOOLCELL_BENCH_POOL_SLOTS=1):
# valgrind cannot reserve the address space of the default 64. Needs valgrind (apt-get install
# valgrind); about two minutes a case.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "bench-instructions: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

micro=${1:-}
if [ -z "$micro" ]; then
  micro=$(cargo bench --workspace --bench micro --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*micro-[^"]*\)".*/\1/p' | tail -1)
  [ -n "$micro" ] || { echo "bench-instructions: could not build the micro bench" >&2; exit 1; }
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Instructions one call of divan case $1 executes.
per_call() {
  local case=$1 n totals=()
  for n in 300 1300; do
    TOOLCELL_BENCH_POOL_SLOTS=1 valgrind --tool=callgrind --callgrind-out-file="$out/$case.$n" \
      "$micro" --bench --exact "micro::$case" --sample-count "$n" --sample-size 1 --threads 1 >"$out/$case.$n.log" 2>&1 \
      || { echo "bench-instructions: $case failed under valgrind:" >&2; tail -20 "$out/$case.$n.log" >&2; exit 1; }
    totals+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/$case.$n.log")")
  done
  echo $(( (totals[1] - totals[0]) / 1000 ))
}

floor=$(per_call wasmtime_alone_echo)
echo "wasmtime_alone_echo            $floor instructions per call (the floor)"
for case in echo_through_the_port typed_echo_through_the_port; do
  count=$(per_call "$case")
  echo "$(printf '%-30s' "$case") $count instructions per call, $(( count - floor )) over the floor"
done
# No instance: what of the share any pipeline must spend (the arguments parsed, checked and
# written out again), counted alone.
echo "$(printf '%-30s' echo_arguments_alone) $(per_call echo_arguments_checked_and_written_alone) instructions per call (no instance; divan's own timing of each sample, about 1,200, included)"
