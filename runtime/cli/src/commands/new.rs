//! `toolcell new NAME`: a tool project to start from, in Rust, Python or JavaScript.

use crate::exit;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

pub(crate) fn run(
    name: &str,
    language: crate::scaffold::Language,
    dir: Option<&std::path::Path>,
) -> ExitCode {
    use crate::scaffold::ScaffoldError;
    let dir = dir.map_or_else(|| PathBuf::from(name), std::path::Path::to_path_buf);
    match crate::scaffold::new_tool(name, language, &dir) {
        Ok(files) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "wrote {}:", dir.display());
            for file in files {
                let _ = writeln!(out, "  {}", file.display());
            }
            let _ = writeln!(
                out,
                "build it:  cd {} && {}\nrun it:    toolcell --tools {} call {name} '{{\"name\":\"world\"}}'",
                dir.display(),
                language.build_command(name),
                language.output_dir(),
            );
            ExitCode::SUCCESS
        }
        Err(error @ (ScaffoldError::BadName(_) | ScaffoldError::NotEmpty(_))) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(exit::USAGE)
        }
        Err(error) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(exit::FAILED)
        }
    }
}
