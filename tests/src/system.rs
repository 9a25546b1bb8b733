//! The distribution's programs some tests run (nginx, docker-registry), installed with apt-get
//! on first use when they are missing, as the Python and npm toolchains are (`toolchains.rs`).
//!
//! This is the one place that decides which system packages the tests need; `.ci/run` installs
//! none of them itself. A program that is missing is installed when the machine allows it
//! (running as root with `apt-get`, or with passwordless `sudo`): `apt-get update` once per test
//! run, then the package, with its output kept unless the install fails. Where installing is
//! not possible, the test that needs the program fails with one line naming the command to run;
//! it is never skipped.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// A program from a distribution package.
#[derive(Debug)]
pub struct SystemProgram {
    /// The Debian package that brings it.
    pub package: &'static str,
    /// Where the package puts the program (the first that exists is used).
    pub paths: &'static [&'static str],
    /// What needs it, for the failure's message.
    pub needed_by: &'static str,
    /// The service the package may start on a machine with an init (stopped after install:
    /// the tests start their own, on loopback ports).
    pub service: &'static str,
}

/// nginx, for the test with two replicas behind a load balancer.
pub const NGINX: SystemProgram = SystemProgram {
    package: "nginx-light",
    paths: &["/usr/sbin/nginx", "/usr/bin/nginx"],
    needed_by: "the load-balancer test (tests/src/http.rs)",
    service: "nginx",
};

/// distribution's registry, for the OCI tests (a real registry on a loopback port).
pub const DOCKER_REGISTRY: SystemProgram = SystemProgram {
    package: "docker-registry",
    paths: &["/usr/bin/docker-registry", "/usr/sbin/docker-registry"],
    needed_by: "the registry tests (tests/src/oci.rs)",
    service: "docker-registry",
};

/// Redis (7, from Debian), the store replicas share in the `--state` tests.
pub const REDIS: SystemProgram = SystemProgram {
    package: "redis-server",
    paths: &["/usr/bin/redis-server", "/usr/sbin/redis-server"],
    needed_by: "the shared-store tests (tests/src/http/replicas.rs)",
    service: "redis-server",
};

/// One install at a time; the outcome of each package's install in this run, so a failed one
/// is reported again rather than tried again.
static INSTALLS: Mutex<Vec<(&'static str, Result<(), String>)>> = Mutex::new(Vec::new());

/// Whether `apt-get update` ran in this run (and how it ended).
static UPDATED: OnceLock<Result<(), String>> = OnceLock::new();

/// The program's path, installing its package first if it is missing and the machine allows
/// it. Panics with the command to run when it cannot be had.
pub fn require(program: &SystemProgram) -> PathBuf {
    if let Some(found) = find(program) {
        return found;
    }
    let mut installs = INSTALLS.lock().unwrap_or_else(|p| p.into_inner());
    // Another test may have installed it while this one waited.
    if let Some(found) = find(program) {
        return found;
    }
    let outcome = match installs
        .iter()
        .find(|(package, _)| *package == program.package)
    {
        Some((_, outcome)) => outcome.clone(),
        None => {
            let outcome = install(program.package, program.service);
            installs.push((program.package, outcome.clone()));
            outcome
        }
    };
    match (outcome, find(program)) {
        (Ok(()), Some(found)) => found,
        (Ok(()), None) => panic!(
            "{} is needed by {}: apt-get installed {} but none of {:?} exists",
            program.package, program.needed_by, program.package, program.paths
        ),
        (Err(why), _) => panic!(
            "{} is needed by {}: {why}",
            program.package, program.needed_by
        ),
    }
}

fn find(program: &SystemProgram) -> Option<PathBuf> {
    program
        .paths
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

/// How apt-get is run here: directly as root, through `sudo -n` when that needs no password;
/// `None` when neither works.
fn apt_prefix() -> Option<Vec<&'static str>> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0");
    let have_apt = Command::new("apt-get")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !have_apt {
        return None;
    }
    if root {
        return Some(vec![]);
    }
    let sudo = Command::new("sudo")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|output| output.status.success());
    sudo.then(|| vec!["sudo", "-n"])
}

fn run(prefix: &[&str], args: &[&str]) -> Result<(), String> {
    let mut words: Vec<&str> = prefix.to_vec();
    words.extend_from_slice(&["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
    words.extend_from_slice(args);
    let output: Output = Command::new(words[0])
        .args(&words[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| format!("running {}: {error}", words.join(" ")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(format!(
        "`{}` failed ({}): {}",
        words.join(" "),
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    ))
}

/// Install `package` with apt-get, or say why not and what to run instead.
fn install(package: &str, service: &str) -> Result<(), String> {
    let Some(prefix) = apt_prefix() else {
        return Err(format!(
            "it is missing and this user cannot install it (not root, no passwordless sudo, or \
             no apt-get): run `sudo apt-get install {package}`"
        ));
    };
    UPDATED
        .get_or_init(|| run(&prefix, &["update", "-qq"]))
        .clone()
        .map_err(|why| {
            format!("{why}; run `sudo apt-get update && sudo apt-get install {package}`")
        })?;
    run(
        &prefix,
        &["install", "-y", "-qq", "--no-install-recommends", package],
    )
    .map_err(|why| format!("{why}; run `sudo apt-get install {package}`"))?;
    // A package that brings a service may start it (on a machine with an init): the tests
    // start their own on loopback ports, and the package's own is not wanted.
    let mut stop: Vec<&str> = prefix.clone();
    stop.extend_from_slice(&["systemctl", "stop", service]);
    let _ = Command::new(stop[0])
        .args(&stop[1..])
        .stdin(std::process::Stdio::null())
        .output();
    Ok(())
}

/// Swap for the test that needs the kernel to swap a server's memory out
/// (`fresh_instance::a_call_swapped_out_leaves_nothing_to_the_next`): the swap already on, or a
/// 256 MiB swap file in `/var/tmp` (on disk: tmpfs cannot hold swap) turned on (root only: `swapon`) and off again when the
/// guard is dropped. Panics, naming what failed, where swap cannot be had; never skipped.
pub fn swap_on() -> Swap {
    let active = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if active.lines().skip(1).any(|line| !line.trim().is_empty()) {
        return Swap { file: None };
    }
    let file = PathBuf::from(format!(
        "/var/tmp/toolcell-test-swap-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&file);
    let run = |program: &str, args: &[&std::ffi::OsStr]| {
        let output = Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("swap is needed: {program} did not run: {error}"));
        assert!(
            output.status.success(),
            "swap is needed (run the tests as root, or turn swap on): {program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    };
    run(
        "fallocate",
        &["-l".as_ref(), SWAP_FILE_BYTES.as_ref(), file.as_os_str()],
    );
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("the swap file's mode");
    run("mkswap", &[file.as_os_str()]);
    run("swapon", &[file.as_os_str()]);
    Swap { file: Some(file) }
}

/// The swap file [`swap_on`] makes: room for the 16 MiB a test swaps out, and the rest of the
/// server's memory beside it.
const SWAP_FILE_BYTES: &str = "256M";

/// Swap on for as long as it is held (see [`swap_on`]).
pub struct Swap {
    file: Option<PathBuf>,
}

impl Drop for Swap {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            // Brings what is swapped out back in; then the file can go.
            let _ = Command::new("swapoff").arg(file).output();
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Ask the kernel to swap out every private writable mapping of process `pid`
/// (`process_madvise(MADV_PAGEOUT)`, through Python's ctypes: the tests deny `unsafe`), and
/// return how much of the process is then swapped out (`VmSwap`, bytes).
pub fn page_out(pid: u32) -> u64 {
    let script = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
pidfd = libc.syscall(434, pid, 0)  # pidfd_open
if pidfd < 0:
    sys.exit("pidfd_open failed: errno %d" % ctypes.get_errno())
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
for line in open("/proc/%d/maps" % pid):
    fields = line.split()
    if not fields[1].startswith("rw") or fields[1][3] != "p":
        continue
    low, high = (int(x, 16) for x in fields[0].split("-"))
    vec = iovec(low, high - low)
    libc.syscall(440, pidfd, ctypes.byref(vec), 1, 21, 0)  # process_madvise, MADV_PAGEOUT
"#;
    let output = Command::new("python3")
        .args(["-c", script, &pid.to_string()])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "paging out {pid}: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    swapped_out(pid)
}

/// How much of process `pid` is swapped out (`VmSwap` in `/proc/PID/status`), in bytes.
pub fn swapped_out(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmSwap:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}
