//! The book (`docs/`) and the README say only what runs: every TOML block is read by the
//! parser its info string names (`toml,policy`: [`Policy::from_toml`]; `toml,tokens`: the
//! `--tokens` loader; `toml,oauth`: the `--oauth` loader; `toml,cargo`: TOML; and
//! `yaml,policy`: a `policy.yaml` as a typed component's is read), every
//! `toolcell` command line in a `sh` block parses with the CLI's own parser, and the book's
//! table of contents names every chapter and only chapters that exist. The checker is shown to
//! fail on a broken block and a broken command (the last tests here).

use std::path::{Path, PathBuf};
use toolcell::policy::Policy;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The README and every chapter of the book.
fn documents() -> Vec<PathBuf> {
    let mut found = vec![root().join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    chapters.sort();
    found.extend(chapters);
    found
}

/// A fenced block: its info string, its text, and the line it starts on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// The fenced blocks of `markdown` (```` ``` ```` fences, possibly indented in a list).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(String, usize, String, usize)> = None;
    for (number, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((info.trim().to_owned(), indent, String::new(), number + 1));
                }
            }
            Some((info, fence_indent, text, start)) => {
                if trimmed.starts_with("```") {
                    found.push(Block {
                        info: std::mem::take(info),
                        text: std::mem::take(text),
                        line: *start,
                    });
                    open = None;
                } else {
                    // A block inside a list item is indented with it.
                    let cut = line
                        .char_indices()
                        .take_while(|(at, c)| *at < *fence_indent && *c == ' ')
                        .count();
                    text.push_str(&line[cut..]);
                    text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    found
}

/// The commands of a `sh` block: each logical line (continued with `\`), split as the shell
/// would, cut at `&&`, `||`, `;`, `|` and `&`, with leading `VAR=value` words and redirections
/// dropped.
fn segments(block: &str) -> Result<Vec<Vec<String>>, String> {
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(continued) => {
                current.push_str(continued);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut commands = Vec::new();
    for line in logical {
        let words = shlex::split(&line).ok_or_else(|| format!("unbalanced quotes: {line}"))?;
        // A comment ends the line.
        let words: Vec<String> = words
            .into_iter()
            .take_while(|word| !word.starts_with('#'))
            .collect();
        for segment in words.split(|word| matches!(word.as_str(), "&&" | "||" | ";" | "|" | "&")) {
            let mut segment: Vec<String> = segment
                .iter()
                .skip_while(|word| {
                    word.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    })
                })
                .cloned()
                .collect();
            // A redirection (`> FILE`, `>> FILE`, `< FILE`) is the shell's, not an argument.
            while let Some(at) = segment
                .iter()
                .position(|word| matches!(word.as_str(), ">" | ">>" | "<" | "2>"))
            {
                segment.drain(at..(at + 2).min(segment.len()));
            }
            // A trailing `&` glued to the last word (`serve ... &` is split off above).
            if let Some(last) = segment.last_mut()
                && last.ends_with('&')
                && last != "&"
            {
                last.pop();
            }
            if !segment.is_empty() {
                commands.push(segment);
            }
        }
    }
    Ok(commands)
}

/// The `toolcell` argument lists of a `sh` block ([`segments`]): a segment that runs
/// `toolcell ...` or `cargo run ... -- ...` is a command line of the CLI.
fn command_lines(block: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = Vec::new();
    for mut segment in segments(block)? {
        match segment.first().map(String::as_str) {
            Some("toolcell") => commands.push(segment.split_off(1)),
            Some("cargo") if segment.get(1).map(String::as_str) == Some("run") => {
                if let Some(at) = segment.iter().position(|word| word == "--") {
                    commands.push(segment.split_off(at + 1));
                }
            }
            _ => {}
        }
    }
    Ok(commands)
}

/// What `cargo` and `just` resolve a command's names against: the workspace's packages and
/// their targets (`cargo metadata`), its default members, and the justfile's recipes.
struct Workspace {
    /// Each package's name, with its targets as `(kind, name)`.
    packages: Vec<(String, Vec<(String, String)>)>,
    /// The packages a command without `-p` or `--workspace` selects.
    default_members: Vec<String>,
    recipes: Vec<String>,
}

impl Workspace {
    fn read() -> Workspace {
        let metadata = crate::support::cargo_metadata();
        let mut names_by_id = std::collections::HashMap::new();
        let mut packages = Vec::new();
        for package in metadata["packages"].as_array().expect("packages") {
            let name = package["name"].as_str().expect("a name").to_owned();
            names_by_id.insert(
                package["id"].as_str().expect("an id").to_owned(),
                name.clone(),
            );
            let targets = package["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .flat_map(|target| {
                    let name = target["name"].as_str().unwrap_or_default().to_owned();
                    target["kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|kind| kind.as_str())
                        .map(move |kind| (kind.to_owned(), name.clone()))
                        .collect::<Vec<_>>()
                })
                .collect();
            packages.push((name, targets));
        }
        let default_members = metadata["workspace_default_members"]
            .as_array()
            .expect("workspace_default_members")
            .iter()
            .filter_map(|id| id.as_str().and_then(|id| names_by_id.get(id)).cloned())
            .collect();
        let justfile = std::fs::read_to_string(root().join("justfile")).expect("the justfile");
        let recipes = justfile
            .lines()
            .filter(|line| !line.starts_with([' ', '\t', '#']) && line.contains(':'))
            .filter_map(|line| line.split([' ', ':']).next())
            .filter(|name| !name.is_empty() && !name.contains('='))
            .map(str::to_owned)
            .collect();
        Workspace {
            packages,
            default_members,
            recipes,
        }
    }

    /// Why `words` (a `cargo ...` or `just ...` command as printed, run from the repository's
    /// root) would fail to find what it names, if it would: a package, an example, bench, test
    /// or binary in the packages it selects, a recipe. Commands for another workspace (a
    /// `--target` or `--manifest-path` of their own) are not judged.
    fn problem(&self, words: &[String]) -> Option<String> {
        match words.first().map(String::as_str) {
            Some("just") => {
                let recipe = words.get(1)?;
                (!recipe.starts_with('-') && !self.recipes.contains(recipe))
                    .then(|| format!("the justfile has no recipe `{recipe}`"))
            }
            Some("cargo") => self.cargo_problem(words),
            _ => None,
        }
    }

    fn cargo_problem(&self, words: &[String]) -> Option<String> {
        let subcommand = words.get(1)?.as_str();
        if !["run", "test", "bench", "build", "check", "clippy", "doc"].contains(&subcommand)
            || words
                .iter()
                .any(|word| word.starts_with("--target") || word.starts_with("--manifest-path"))
        {
            return None;
        }
        // The command's own words, before what it passes on (`-- ...`).
        let own = words
            .iter()
            .position(|word| word == "--")
            .map_or(words, |at| &words[..at]);
        let value_of = |flags: &[&str]| -> Vec<String> {
            let mut found = Vec::new();
            for (at, word) in own.iter().enumerate() {
                for flag in flags {
                    if word == flag {
                        found.extend(own.get(at + 1).cloned());
                    } else if let Some(value) = word.strip_prefix(&format!("{flag}=")) {
                        found.push(value.to_owned());
                    }
                }
            }
            found
        };
        let named = value_of(&["-p", "--package"]);
        for package in &named {
            if !self.packages.iter().any(|(name, _)| name == package) {
                return Some(format!("no package `{package}` in the workspace"));
            }
        }
        let selected: Vec<&String> = if !named.is_empty() {
            named.iter().collect()
        } else if own.iter().any(|word| word == "--workspace") {
            self.packages.iter().map(|(name, _)| name).collect()
        } else {
            self.default_members.iter().collect()
        };
        for (flag, kind) in [
            ("--example", "example"),
            ("--bench", "bench"),
            ("--test", "test"),
            ("--bin", "bin"),
        ] {
            for target in value_of(&[flag]) {
                let found = self.packages.iter().any(|(name, targets)| {
                    selected.contains(&name)
                        && targets
                            .iter()
                            .any(|(has_kind, has_name)| has_kind == kind && *has_name == target)
                });
                if !found {
                    return Some(format!(
                        "no {kind} target `{target}` in {}",
                        selected
                            .iter()
                            .map(|name| name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        None
    }
}

/// Parse `arguments` as the `toolcell` binary would, or say why not.
fn parses_as_a_command(arguments: &[String]) -> Result<(), String> {
    use clap::Parser as _;
    toolcell_cli::Cli::try_parse_from(
        std::iter::once("toolcell".to_owned()).chain(arguments.iter().cloned()),
    )
    .map(|_| ())
    .map_err(|error| error.to_string())
}

/// A scratch place where a tokens or OAuth example's absolute paths can exist: each quoted
/// absolute path in `text` is moved under `scratch` (a directory made for it; a `jwks_file`
/// holds a real key set), so the loader checks what the example says and not this machine.
fn rooted_in(text: &str, scratch: &Path) -> String {
    let mut rooted = String::new();
    for line in text.lines() {
        let mut out = line.to_owned();
        if let Some(start) = line.find("\"/") {
            let rest = &line[start + 1..];
            if let Some(end) = rest.find('"') {
                let original = &rest[..end];
                let moved = scratch.join(original.trim_start_matches('/'));
                if line.trim_start().starts_with("jwks_file") {
                    std::fs::create_dir_all(moved.parent().expect("a parent")).expect("a dir");
                    std::fs::write(&moved, crate::http::Issuer::new("docs").jwks().to_string())
                        .expect("a key set");
                } else {
                    std::fs::create_dir_all(&moved).expect("a dir");
                }
                out = line.replacen(original, &moved.to_string_lossy(), 1);
            }
        }
        rooted.push_str(&out);
        rooted.push('\n');
    }
    rooted
}

/// Whether a TOML block reads with the parser its info string names.
fn toml_block_reads(kind: &str, text: &str) -> Result<(), String> {
    match kind {
        "policy" => Policy::from_toml(text)
            .map(|_| ())
            .map_err(|error| error.to_string()),
        "cargo" => text
            .parse::<toml::Table>()
            .map(|_| ())
            .map_err(|error| error.to_string()),
        "tokens" | "oauth" => {
            let scratch = tempfile::tempdir().map_err(|error| error.to_string())?;
            let file = scratch.path().join(format!("{kind}.toml"));
            std::fs::write(&file, rooted_in(text, scratch.path()))
                .map_err(|error| error.to_string())?;
            // The server's usual tools: an example may name them (a tool's scope).
            let mut runtime = crate::support::builder()
                .build()
                .map_err(|error| error.to_string())?;
            if kind == "tokens" {
                toolcell_mcp::http::auth::Tokens::load(&file, &mut runtime)
                    .map(|_| ())
                    .map_err(|error| error.to_string())
            } else {
                toolcell_mcp::http::oauth::OAuth::load(&file, &mut runtime)
                    .map(|_| ())
                    .map_err(|error| error.to_string())
            }
        }
        other => Err(format!(
            "a TOML block must name its parser (toml,policy | toml,tokens | toml,oauth | \
             toml,cargo), not {other:?}"
        )),
    }
}

/// Every problem with the blocks of `markdown` (named `name` in the messages): a TOML block
/// its parser refuses, a `toolcell` command line the CLI refuses, a `cargo` or `just` command
/// that names what the workspace does not have ([`Workspace::problem`]).
fn problems(name: &str, markdown: &str) -> (Vec<String>, usize, usize) {
    let (mut problems, tomls, commands) = block_problems(name, markdown);
    let workspace = Workspace::read();
    for block in blocks(markdown) {
        if block.info.split(',').next() != Some("sh") {
            continue;
        }
        for segment in segments(&block.text).unwrap_or_default() {
            if let Some(why) = workspace.problem(&segment) {
                problems.push(format!(
                    "{name}:{}: `{}`: {why}",
                    block.line,
                    segment.join(" ")
                ));
            }
        }
    }
    (problems, tomls, commands)
}

/// [`problems`], but for the `cargo` and `just` commands.
fn block_problems(name: &str, markdown: &str) -> (Vec<String>, usize, usize) {
    let mut problems = Vec::new();
    let (mut tomls, mut commands) = (0, 0);
    for block in blocks(markdown) {
        let mut info = block.info.split(',');
        let language = info.next().unwrap_or_default();
        let kind = info.next().unwrap_or_default();
        match language {
            "toml" => {
                tomls += 1;
                if let Err(why) = toml_block_reads(kind, &block.text) {
                    problems.push(format!("{name}:{}: toml,{kind}: {why}", block.line));
                }
            }
            // A Wassette policy.yaml, read as a typed component's is.
            "yaml" if kind == "policy" => {
                tomls += 1;
                if let Err(why) = toolcell::policy::yaml::PolicyYaml::parse(&block.text) {
                    problems.push(format!("{name}:{}: yaml,policy: {why}", block.line));
                }
            }
            "sh" => match command_lines(&block.text) {
                Ok(lines) => {
                    for arguments in lines {
                        commands += 1;
                        if let Err(why) = parses_as_a_command(&arguments) {
                            problems.push(format!(
                                "{name}:{}: `toolcell {}`: {why}",
                                block.line,
                                arguments.join(" ")
                            ));
                        }
                    }
                }
                Err(why) => problems.push(format!("{name}:{}: {why}", block.line)),
            },
            _ => {}
        }
    }
    (problems, tomls, commands)
}

#[test]
fn every_toml_block_and_command_line_in_the_docs_is_accepted() {
    let mut all = Vec::new();
    let (mut tomls, mut commands) = (0, 0);
    for document in documents() {
        let text = std::fs::read_to_string(&document).expect("readable");
        let name = document
            .strip_prefix(root())
            .unwrap_or(&document)
            .display()
            .to_string();
        let (problems, t, c) = problems(&name, &text);
        all.extend(problems);
        tomls += t;
        commands += c;
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
    // The docs have many of each: a scan that finds few is broken.
    assert!(tomls >= 5, "only {tomls} TOML blocks found");
    assert!(commands >= 25, "only {commands} command lines found");
}

/// The commands the justfile's recipes run, and those the examples' headers print, name what
/// the workspace has: as a newcomer would type them, from the repository's root.
#[test]
fn every_cargo_and_just_command_the_justfile_and_examples_print_finds_what_it_names() {
    let workspace = Workspace::read();
    let mut checked = 0;
    let mut wrong = Vec::new();
    let justfile = std::fs::read_to_string(root().join("justfile")).expect("the justfile");
    let recipes: String = justfile
        .lines()
        .filter(|line| line.starts_with([' ', '\t']))
        .map(|line| format!("{}\n", line.trim()))
        .collect();
    let mut examples = Vec::new();
    for crate_dir in std::fs::read_dir(root().join("runtime")).expect("runtime/") {
        let dir = crate_dir.expect("an entry").path().join("examples");
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = entry.expect("an entry").path();
            let text = std::fs::read_to_string(&path).expect("an example");
            let header: String = text
                .lines()
                .filter_map(|line| line.strip_prefix("//! "))
                .filter(|line| line.starts_with("cargo ") || line.starts_with("just "))
                .map(|line| format!("{line}\n"))
                .collect();
            examples.push((path.display().to_string(), header));
        }
    }
    for (name, text) in std::iter::once(("justfile".to_owned(), recipes)).chain(examples) {
        for segment in segments(&text).expect("shell words") {
            if matches!(segment.first().map(String::as_str), Some("cargo" | "just")) {
                checked += 1;
                if let Some(why) = workspace.problem(&segment) {
                    wrong.push(format!("{name}: `{}`: {why}", segment.join(" ")));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 10, "only {checked} commands found");
}

#[test]
fn a_command_that_names_what_is_not_there_is_caught() {
    let workspace = Workspace::read();
    let words = |line: &str| shlex::split(line).expect("words");
    for (line, wrong) in [
        ("cargo run --release --example embed", true),
        ("cargo run --release -p toolcell --example embed", false),
        ("cargo bench -p toolcell-tests --bench no_such_bench", true),
        ("cargo bench --workspace --bench calls -- anything", false),
        ("cargo test -p no-such-package", true),
        ("just no-such-recipe", true),
        ("just test", false),
        (
            "cargo build --target wasm32-wasip2 --example whatever",
            false,
        ),
    ] {
        assert_eq!(
            workspace.problem(&words(line)).is_some(),
            wrong,
            "{line}: {:?}",
            workspace.problem(&words(line))
        );
    }
}

#[test]
fn the_book_lists_every_chapter_and_only_chapters_that_exist() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).expect("docs/SUMMARY.md");
    assert!(docs.join("book.toml").is_file(), "docs/book.toml");
    let listed: Vec<String> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or(target).to_owned())
        .collect();
    for chapter in &listed {
        assert!(
            docs.join(chapter).is_file(),
            "SUMMARY.md lists {chapter}, which is not there"
        );
    }
    for document in documents().iter().skip(1) {
        let name = document
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .to_string();
        if name != "SUMMARY.md" {
            assert!(listed.contains(&name), "docs/{name} is not in SUMMARY.md");
        }
    }
    for chapter in [
        "concepts.md",
        "cli.md",
        "policy.md",
        "http.md",
        "distribution.md",
        "writing-tools.md",
        "embedding.md",
        "security.md",
        "limits.md",
        "benchmarks.md",
    ] {
        assert!(
            listed.iter().any(|listed| listed == chapter),
            "no {chapter}"
        );
    }
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(
        readme.lines().count() <= 250,
        "the README is {} lines: what does not introduce belongs in the book",
        readme.lines().count()
    );
    assert!(
        readme.contains("cargo test --release --workspace"),
        "the README gives the test command CI runs"
    );
}

/// A broken example is caught: a policy key that does not exist, a tokens file whose token is
/// not a digest, a policy.yaml of a version toolcell does not read, an untagged TOML block, a flag the CLI does not have, a command that does not
/// exist; and the good forms of the same pass.
#[test]
fn a_broken_example_is_caught() {
    let broken = [
        "```toml,policy\n[tools.echo]\nno_such_key = 1\n```\n",
        "```toml,tokens\n[[token]]\nsha256 = \"not-a-digest\"\ntenant = \"a\"\n```\n",
        "```toml\n[files]\n```\n",
        "```sh\ntoolcell call echo --no-such-flag\n```\n",
        "```sh\nTOOLCELL_LOG=debug toolcell frobnicate\n```\n",
        "```sh\ncargo run --release -- serve --http not-an-address\n```\n",
        "```yaml,policy\nversion: \"2.0\"\npermissions: {}\n```\n",
    ];
    for markdown in broken {
        let (problems, _, _) = problems("example", markdown);
        assert_eq!(problems.len(), 1, "not caught: {markdown}");
    }
    let good = [
        "```toml,policy\n[tools.echo]\ncore = true\n```\n",
        "```yaml,policy\nversion: \"1.0\"\npermissions: {}\n```\n",
        "```sh\nTOOLCELL_LOG=debug toolcell call echo '{\"text\":\"hi\"}' # a comment\n```\n",
        "```sh\ntoolcell serve --http 127.0.0.1:0 \\\n  --grace-secs 5 &\ncurl -s localhost\n```\n",
    ];
    for markdown in good {
        let (problems, _, _) = problems("example", markdown);
        assert!(problems.is_empty(), "{markdown}: {problems:?}");
    }
}
