//! The example tools in other languages (`guest-tools/python/`, `guest-tools/js/`), built with
//! their own toolchains for the tests and the bench.
//!
//! Each toolchain is pinned and lives under `target/`, made on first use (`.ci/run` makes them
//! up front): componentize-py in the virtual environment `target/py-guests-venv`, and
//! componentize-js and componentize-qjs in `target/js-tooling`, installed with `npm ci` from
//! `guest-tools/js/package-lock.json`. A tool is built once per change of its source, of the WIT
//! or of the toolchain, into `target/guest-builds/`.

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The componentize-py the Python tools are built with (its output depends on the version).
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The JavaScript toolchains, which build the same source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Js {
    /// componentize-js (SpiderMonkey, via StarlingMonkey): the toolchain the book names (docs/writing-tools.md).
    StarlingMonkey,
    /// componentize-qjs with `--sync` (QuickJS): smaller and faster to start, a slower engine.
    QuickJs,
}

/// One toolchain run at a time: they are CPU-heavy, and two tests may want the same tool.
static BUILDING: Mutex<()> = Mutex::new(());

/// A virtual environment under `target/` named `name` in which `works` holds, made with
/// `python3 -m venv` and `pip install requirement` if it does not hold yet.
pub fn python_venv(name: &str, requirement: &str, works: impl Fn(&Path) -> bool) -> PathBuf {
    let venv = root().join("target").join(name);
    if !works(&venv) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 is needed for the Python-driven tests");
        assert!(made.success(), "python3 -m venv failed");
        let installed = Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "--quiet", requirement])
            .status()
            .expect("pip");
        assert!(installed.success(), "pip install {requirement} failed");
    }
    assert!(
        works(&venv),
        "{requirement} does not work in {}",
        venv.display()
    );
    venv
}

/// The componentize-py executable, installed into `target/py-guests-venv` if it is not there.
pub fn componentize_py() -> PathBuf {
    let venv = python_venv("py-guests-venv", COMPONENTIZE_PY, |venv| {
        Command::new(venv.join("bin/componentize-py"))
            .arg("--version")
            .output()
            .is_ok_and(|out| {
                out.status.success() && out.stdout.starts_with(b"componentize-py 0.25.1")
            })
    });
    venv.join("bin/componentize-py")
}

/// `target/js-tooling/node_modules`, installed with `npm ci` from `guest-tools/js/`'s lock file
/// if it is missing or was installed from another lock.
pub fn js_tooling() -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    npm_installed(
        &INSTALLING,
        &root().join("guest-tools/js"),
        &root().join("target/js-tooling"),
    )
    .join("node_modules")
}

/// `target`, where the npm packages that `manifest`'s `package.json` and `package-lock.json`
/// pin are installed with `npm ci`: once, and again whenever the lock changes (a stamp beside
/// `node_modules` says which lock was installed). `installing` keeps two tests from installing
/// into `target` at once.
fn npm_installed(installing: &Mutex<()>, manifest: &Path, target: &Path) -> PathBuf {
    let _installing = installing
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let lock = std::fs::read(manifest.join("package-lock.json")).expect("the npm lock");
    let installed = target.join("node_modules/.package-lock.json.toolcell");
    if std::fs::read(&installed).ok().as_deref() != Some(&lock[..]) {
        std::fs::create_dir_all(target).expect("the npm target");
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(manifest.join(file), target.join(file)).expect("the npm manifest");
        }
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(target)
            .status()
            .expect("npm is needed (node and npm)");
        assert!(status.success(), "npm ci in {} failed", target.display());
        std::fs::write(&installed, &lock).expect("the install's stamp");
    }
    target.to_owned()
}

/// The component built from `guest-tools/python/<name>/app.py`.
pub fn python_tool(name: &str) -> Vec<u8> {
    python_component(&root().join("guest-tools/python").join(name), name)
}

/// The component built from the Python module `app.py` in `source` (labelled `name`).
pub fn python_component(source: &Path, name: &str) -> Vec<u8> {
    built(&format!("python-{name}"), &[source.join("app.py")], |out| {
        let mut command = Command::new(componentize_py());
        command
            .arg("-d")
            .arg(root().join("wit"))
            .args(["-w", "guest", "componentize", "-p"])
            .arg(source)
            .args(["app", "-o"])
            .arg(out)
            // Keep the source tree clean of bytecode caches.
            .env("PYTHONDONTWRITEBYTECODE", "1");
        command
    })
}

/// The component built from `guest-tools/js/<name>/tool.js` with `toolchain`.
pub fn js_tool(name: &str, toolchain: Js) -> Vec<u8> {
    let source = root().join("guest-tools/js").join(name).join("tool.js");
    let bin = js_tooling().join(".bin");
    let label = match toolchain {
        Js::StarlingMonkey => "js",
        Js::QuickJs => "qjs",
    };
    built(
        &format!("{label}-{name}"),
        &[
            source.clone(),
            root().join("guest-tools/js/package-lock.json"),
        ],
        |out| {
            let mut command;
            match toolchain {
                Js::StarlingMonkey => {
                    command = Command::new(bin.join("componentize-js"));
                    command
                        .arg("--wit")
                        .arg(root().join("wit"))
                        .args(["--world-name", "guest", "-o"])
                        .arg(out)
                        .arg(&source);
                }
                Js::QuickJs => {
                    command = Command::new(bin.join("componentize-qjs"));
                    command
                        .arg("--wit")
                        .arg(root().join("wit"))
                        .args(["--world", "guest", "--sync", "--js"])
                        .arg(&source)
                        .arg("-o")
                        .arg(out);
                }
            }
            command
        },
    )
}

/// The component of a typed world (issue 50: no toolcell WIT) built from the Python module
/// `app.py` in `dir`, against the world `world` of `dir/wit`.
pub fn python_world(dir: &Path, world: &str) -> Vec<u8> {
    let label = dir
        .file_name()
        .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    built(
        &format!("python-world-{label}"),
        &[dir.join("app.py"), dir.join("wit/world.wit")],
        |out| {
            let mut command = Command::new(componentize_py());
            command
                .arg("-d")
                .arg(dir.join("wit"))
                .args(["-w", world, "componentize", "-p"])
                .arg(dir)
                .args(["app", "-o"])
                .arg(out)
                .env("PYTHONDONTWRITEBYTECODE", "1");
            command
        },
    )
}

/// The component of a typed world built from the JavaScript module `source` in `dir` with
/// componentize-js, against the world `world` of `dir/wit`.
pub fn js_world(dir: &Path, source: &str, world: &str) -> Vec<u8> {
    let label = dir
        .file_name()
        .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    let bin = js_tooling().join(".bin");
    built(
        &format!("js-world-{label}"),
        &[
            dir.join(source),
            dir.join("wit/world.wit"),
            root().join("guest-tools/js/package-lock.json"),
        ],
        |out| {
            let mut command = Command::new(bin.join("componentize-js"));
            command
                .arg("--wit")
                .arg(dir.join("wit"))
                .args(["--world-name", world, "-o"])
                .arg(out)
                .arg(dir.join(source));
            command
        },
    )
}

/// `label`'s component, built by the command `build` makes (given the path to write) when no
/// build of the same `sources`, WIT and toolchain version is in `target/guest-builds/`.
fn built(label: &str, sources: &[PathBuf], build: impl FnOnce(&Path) -> Command) -> Vec<u8> {
    let _building = BUILDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut digest = Sha256::new();
    digest.update(COMPONENTIZE_PY);
    for file in sources.iter().chain([&root().join("wit/tool.wit")]) {
        digest.update(std::fs::read(file).expect("a tool's source"));
    }
    let hash: String = digest.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let out_dir = root().join("target/guest-builds");
    let out = out_dir.join(format!("{label}-{hash}.wasm"));
    if !out.is_file() {
        std::fs::create_dir_all(&out_dir).expect("target/guest-builds");
        let partial = out.with_extension("partial");
        let mut command = build(&partial);
        let status = command.status().expect("run the toolchain");
        assert!(status.success(), "building {label} failed: {command:?}");
        std::fs::rename(&partial, &out).expect("the built tool");
    }
    std::fs::read(&out).expect("the built tool")
}

/// The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned by
/// `tests/conformance/package-lock.json`), installed with `npm ci` into
/// `target/conformance-suite` if it is missing or was installed from another lock: the path of
/// its command (run it with `node`).
/// The conformance suite's newest line (`tests/conformance-next/`), installed once per lock:
/// its entry script, and the loader that lets Node 20 run it (`node --import LOADER SCRIPT`).
pub fn conformance_suite_next() -> (PathBuf, PathBuf) {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let installed = npm_installed(
        &INSTALLING,
        &root().join("tests/conformance-next"),
        &root().join("target/conformance-next"),
    );
    (
        installed.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        root().join("tests/conformance-next/node20/globsync-register.mjs"),
    )
}

/// The conformance suite of the 0.1 line (`tests/conformance/`), installed once per lock.
pub fn conformance_suite() -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    npm_installed(
        &INSTALLING,
        &root().join("tests/conformance"),
        &root().join("target/conformance-suite"),
    )
    .join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}
