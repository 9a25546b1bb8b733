//! The `toolcell` binary: see `toolcell_cli::cli`.

fn main() -> std::process::ExitCode {
    toolcell_cli::cli::main()
}
