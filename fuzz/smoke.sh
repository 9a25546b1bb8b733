#!/usr/bin/env bash
# The fuzz smoke test CI runs: build every target once (instrumented, with AddressSanitizer),
# replay every reproducer in fuzz/regressions/, then fuzz each target for SMOKE_SECONDS
# (default 15) from its checked-in seeds in fuzz/seeds/, in a throwaway corpus. Fails if any
# target crashes; a crash's input is in fuzz/artifacts/<target>/.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). Runs on stable Rust:
# RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass -Zsanitizer=address.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
seconds=${SMOKE_SECONDS:-15}
export RUSTC_BOOTSTRAP=1
# LeakSanitizer's check at process exit once reported a runtime thread's allocations while that
# thread was most likely starting or exiting (see README): skip that check only. libFuzzer's own
# leak check after each input stays on (its -detect_leaks=0 would turn off that one, and not the
# check at exit). cargo-fuzz appends its own options to these.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}leak_check_at_exit=0"

command -v cargo-fuzz >/dev/null || {
  echo "fuzz/smoke.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
  exit 1
}

cargo fuzz build
echo "fuzz/smoke.sh: built in $((SECONDS - start)) s"

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
failed=()
for target in $(cargo fuzz list); do
  mkdir -p "$corpus/$target"
  inputs=("$corpus/$target" "seeds/$target")
  [ -d "regressions/$target" ] && inputs+=("regressions/$target")
  echo "fuzz/smoke.sh: $target for $seconds s"
  # Every input in these directories runs first; then the fuzzer mutates for the rest.
  if ! cargo fuzz run "$target" "${inputs[@]}" -- \
      -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1; then
    failed+=("$target")
  fi
done

echo "fuzz/smoke.sh: done in $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "fuzz/smoke.sh: crashed: ${failed[*]} (inputs in fuzz/artifacts/<target>/)" >&2
  exit 1
fi
