# toolcell's recipes. CI (.ci/run) runs the same commands the README names.

set shell := ["bash", "-euo", "pipefail", "-c"]

guest_workspaces := "guest-tools tests/guests"

# Build the toolcell binary and the built-in tools it embeds.
build:
    cargo build --release

# Run every test, exactly as CI does.
test:
    cargo test --release --workspace

# Formatting and clippy (warnings are errors), host and guests.
lint:
    cargo fmt --all --check
    cargo clippy --release --workspace --all-targets -- -D warnings
    for ws in {{guest_workspaces}}; do (cd $ws && cargo fmt --all --check && cargo clippy --release --target wasm32-wasip2 -- -D warnings); done

# Build the guests with cargo-component instead of plain cargo (cargo install cargo-component).
guests:
    for ws in {{guest_workspaces}}; do (cd $ws && cargo component build --release); done

# Call several tools through the CLI, as a model would.
demo:
    cargo run --release -q -- list
    cargo run --release -q -- call echo '{"text":"héllo"}'
    cargo run --release -q -- call clock
    cargo run --release -q -- find ECHO
    cargo run --release -q -- call call_tool '{"name":"echo","arguments":{"text":"via call_tool"}}' --json
    cargo run --release -q -- bench echo '{"text":"what does a fresh instance cost?"}'
    cargo run --release -q -p toolcell --example embed

# The benchmark (see BENCHMARKS.md): divan's statistics for the in-process cases, then one run
# of every case side by side, with p99 and the ratios.
bench:
    cargo build --release --features full
    cargo bench -p toolcell-tests --bench micro
    cargo bench -p toolcell-tests --bench calls

# This tree beside an earlier commit's build, in one run: echo in process, over stdio and over
# HTTP (tests/bench-against.sh; the earlier build is kept under target/bench-against/).
bench-against commit:
    bash tests/bench-against.sh {{commit}}

# Instructions per in-process echo and toolcell's share over wasmtime's floor, under callgrind
# (apt-get install valgrind): the same count however busy the machine is.
bench-instructions:
    bash tests/bench-instructions.sh

# Build every fuzz target (instrumented) and run each briefly from its seeds (fuzz/README.md;
# cargo install cargo-fuzz --version 0.13.2 --locked). About 14 minutes to build on 2 cores.
fuzz-smoke:
    bash fuzz/smoke.sh

# The soak (see RELIABILITY.md): a million mixed calls in one process, memory and fds watched.
soak:
    cargo bench -p toolcell-tests --bench soak
