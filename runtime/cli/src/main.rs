//! The `toolcell` binary: see the `toolcell_cli` library.

fn main() -> std::process::ExitCode {
    toolcell_cli::main()
}
