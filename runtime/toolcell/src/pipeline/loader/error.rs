//! Why a runtime could not be built at all: [`BuildError`], and how it shows an engine's causes.

use std::path::PathBuf;

/// Why a runtime could not be built at all. (A tool that cannot be loaded does not stop the
/// build: it is a [`LoadError`](crate::LoadError) in
/// [`Runtime::load_errors`](crate::Runtime::load_errors).)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A tools directory could not be listed.
    #[error("reading the tools directory {}: {source}", dir.display())]
    ToolsDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The default workspace could not be opened.
    #[error("opening the workspace {}: {source}", dir.display())]
    Workspace {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The wasm engine or its instance pool could not be made here (the machine refused the
    /// pool's address space, or the engine's settings): the host cannot run.
    #[error("making the wasm engine and its instance pool: {}", with_causes(.source.as_ref()))]
    Engine {
        /// What the engine said, with its causes ([`std::error::Error::source`]).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The host's async runtime (its blocking pool and timers) could not be started.
    #[error("starting the host's async runtime: {source}")]
    AsyncRuntime {
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// `error` and each of its causes, as `error: cause: cause` (the engine's own error says only
/// its outermost context; what the machine refused is further down).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that cannot be made says why, all the way down: wasmtime's error names only
    /// its outermost context, and what the machine refused is its cause.
    #[test]
    fn an_engine_failure_shows_its_causes() {
        let refused = anyhow::anyhow!("mmap of 1 GiB refused (os error 12)")
            .context("reserving the instance pool")
            .context("configuring the wasmtime engine");
        let error = BuildError::Engine {
            source: refused.into(),
        };
        assert_eq!(
            error.to_string(),
            "making the wasm engine and its instance pool: configuring the wasmtime engine: \
             reserving the instance pool: mmap of 1 GiB refused (os error 12)"
        );
    }
}
