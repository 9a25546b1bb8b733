//! `toolcell new`: a working tool project in Rust, Python or JavaScript.
//!
//! Each project is self-contained: the contract (`wit/tool.wit`, copied from this build), a
//! starter tool that greets by name (its schema, a result, and a failure the model reads), a
//! `README.md` with the build line, and a `Makefile` whose `test` builds the tool and checks its
//! answers through `toolcell` on `PATH`. The templates live in `runtime/cli/templates/`.
//!
//! A Rust project uses `wit-bindgen` directly (the `toolcell-guest` helper is not published);
//! a Python one builds with componentize-py 0.25.1 and a JavaScript one with componentize-js
//! 0.23.0, the versions the tests build the shipped examples with.

use std::path::{Path, PathBuf};

/// The languages `toolcell new` writes projects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// Rust, built with `cargo build --release --target wasm32-wasip2`.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js (StarlingMonkey).
    Js,
}

/// The contract every project builds against.
const WIT: &str = include_str!("../../../wit/tool.wit");

/// One file of a template: where it goes in the project, and its text (`{{name}}` is replaced
/// with the tool's name).
type Template = (&'static str, &'static str);

const RUST: &[Template] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("../templates/rust/src/lib.rs")),
    ("Makefile", include_str!("../templates/rust/Makefile")),
    ("README.md", include_str!("../templates/rust/README.md")),
    (".gitignore", include_str!("../templates/rust/gitignore")),
];

const PYTHON: &[Template] = &[
    ("app.py", include_str!("../templates/python/app.py")),
    ("Makefile", include_str!("../templates/python/Makefile")),
    ("README.md", include_str!("../templates/python/README.md")),
    (".gitignore", include_str!("../templates/python/gitignore")),
];

const JS: &[Template] = &[
    ("tool.js", include_str!("../templates/js/tool.js")),
    ("package.json", include_str!("../templates/js/package.json")),
    ("Makefile", include_str!("../templates/js/Makefile")),
    ("README.md", include_str!("../templates/js/README.md")),
    (".gitignore", include_str!("../templates/js/gitignore")),
];

impl Language {
    fn templates(self) -> &'static [Template] {
        match self {
            Language::Rust => RUST,
            Language::Python => PYTHON,
            Language::Js => JS,
        }
    }

    /// The command that builds a project of this language into a component, run in the
    /// project's directory.
    pub fn build_command(self, name: &str) -> String {
        match self {
            Language::Rust => "cargo build --release --target wasm32-wasip2".to_owned(),
            Language::Python => {
                format!("componentize-py -d wit -w guest componentize -p . app -o {name}.wasm")
            }
            Language::Js => {
                format!("npx componentize-js --wit wit --world-name guest -o {name}.wasm tool.js")
            }
        }
    }

    /// The directory, relative to the project, where the build leaves the component.
    pub fn output_dir(self) -> &'static str {
        match self {
            Language::Rust => "target/wasm32-wasip2/release",
            Language::Python | Language::Js => ".",
        }
    }
}

/// Why a project was not written.
#[derive(Debug)]
pub enum ScaffoldError {
    /// The name is not one a tool can have, or not one a project can be named.
    BadName(String),
    /// The directory already has something in it; nothing was written.
    NotEmpty(PathBuf),
    /// Reading or writing the project failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

impl std::fmt::Display for ScaffoldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScaffoldError::BadName(why) => f.write_str(why),
            ScaffoldError::NotEmpty(dir) => write!(
                f,
                "{} already exists and is not empty; nothing was written",
                dir.display()
            ),
            ScaffoldError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ScaffoldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ScaffoldError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Write a new `language` project for a tool named `name` into `dir`, which must not exist or
/// be empty. Returns the files written, relative to `dir`. A file is never overwritten.
pub fn new_tool(name: &str, language: Language, dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    toolcell::registry::check_tool_name(name)
        .map_err(|error| ScaffoldError::BadName(error.into()))?;
    // Package managers want a name that starts with a letter (Cargo refuses a leading digit).
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(ScaffoldError::BadName(format!(
            "{name:?} must start with a letter to name a project"
        )));
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ScaffoldError::Io { path, source }
    };
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ScaffoldError::NotEmpty(dir.to_owned()));
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        Err(error) => return Err(io(dir)(error)),
    }
    let files = std::iter::once(("wit/tool.wit", WIT)).chain(
        language
            .templates()
            .iter()
            .map(|&(path, text)| (path, text)),
    );
    let mut written = Vec::new();
    for (relative, text) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io(&path))?;
        std::io::Write::write_all(&mut file, text.replace("{{name}}", name).as_bytes())
            .map_err(io(&path))?;
        written.push(PathBuf::from(relative));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_names_the_tool_and_nothing_else_is_left_to_fill() {
        for language in [Language::Rust, Language::Python, Language::Js] {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let project = dir.path().join("demo");
            let written = new_tool("demo", language, &project).expect("the project");
            assert!(written.contains(&PathBuf::from("wit/tool.wit")));
            for file in &written {
                let text = std::fs::read_to_string(project.join(file)).expect("a written file");
                assert!(
                    !text.contains("{{"),
                    "{language:?} {}: a placeholder is left",
                    file.display()
                );
            }
            let main = match language {
                Language::Rust => "src/lib.rs",
                Language::Python => "app.py",
                Language::Js => "tool.js",
            };
            let source = std::fs::read_to_string(project.join(main)).expect("the source");
            assert!(
                source.contains(r#""demo""#),
                "{language:?}: the tool is not named demo"
            );
        }
    }

    #[test]
    fn a_bad_name_or_a_used_directory_writes_nothing() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for name in ["", "has space", "9lives", "../escape", &"x".repeat(65)] {
            let project = dir.path().join("p");
            let refused = new_tool(name, Language::Python, &project);
            assert!(
                matches!(refused, Err(ScaffoldError::BadName(_))),
                "{name:?}: {refused:?}"
            );
            assert!(!project.exists(), "{name:?}: the directory was made");
        }
        let used = dir.path().join("used");
        std::fs::create_dir(&used).expect("a directory");
        std::fs::write(used.join("app.py"), "mine").expect("a file");
        let refused = new_tool("demo", Language::Python, &used);
        assert!(
            matches!(refused, Err(ScaffoldError::NotEmpty(_))),
            "{refused:?}"
        );
        assert_eq!(
            std::fs::read_to_string(used.join("app.py")).expect("the file"),
            "mine"
        );
        assert_eq!(std::fs::read_dir(&used).expect("the directory").count(), 1);
    }
}
