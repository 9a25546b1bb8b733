//! The `toolcell` binary: see [`toolcell::cli`].

fn main() -> std::process::ExitCode {
    toolcell::cli::main()
}
