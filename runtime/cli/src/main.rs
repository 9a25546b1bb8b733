//! The `toolcell` binary: see the `toolcell_cli` library.

/// mimalloc, not the system's: a served call's memory is often freed on another worker than
/// the one that allocated it, which glibc's arenas pay for in locks (pipelined calls over stdio
/// cost 5-20 % less CPU with it; BENCHMARKS, "Serving"). Only the binary: an embedder of the
/// libraries keeps its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolcell_cli::main()
}
