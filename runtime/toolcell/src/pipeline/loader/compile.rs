//! Compiling a component (or reading it compiled from the cache), admitting its code to the
//! executor, and loading every tool's code at start when the builder asks for it.

use crate::pipeline::catalog::{Compiling, Executable, Loader, Schemas, Tool};
use crate::tool::info::ToolInfo;
use crate::tool::offer::Offers;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::CacheEntry;
use crate::wasm::lazy::LazyCode;
use crate::wasm::load::LoadError;
use std::sync::Arc;

impl Loader {
    /// Compile (or read compiled from its cache `entry`) and describe the component `source`,
    /// telling the progress report first when it is not in the cache (it is component `at` of
    /// `total`), and count how it went.
    pub(super) async fn compile(
        &mut self,
        wasm: &WasmExecutor,
        entry: &CacheEntry,
        source: &str,
        bytes: &[u8],
        (at, total): (usize, usize),
    ) -> Result<crate::wasm::load::Loaded, LoadError> {
        if !entry.exists()
            && let Some(report) = &mut self.progress
        {
            report(Compiling {
                index: at,
                total,
                source,
            });
        }
        let (loaded, outcome) = wasm.load(entry, source, bytes).await?;
        wasm.code().record(outcome);
        Ok(loaded)
    }
}

/// What a component compiled now turned out to be, its code admitted to the executor.
pub(super) enum Compiled {
    /// A component of the contract: its description and offers, and its schemas.
    Contract(Box<(ToolInfo, Option<Offers>, Schemas)>),
    /// A component that offers prompts, resources or completion, and no tool.
    Provider(Offers),
    /// A component of plain typed exports: its functions.
    Typed(crate::wasm::typed::Reflected),
}

/// Admit the prepared instance `loaded` holds as `code`'s, and say what the component is.
pub(super) fn admit(
    wasm: &WasmExecutor,
    code: &Arc<LazyCode>,
    loaded: crate::wasm::load::Loaded,
) -> Compiled {
    match loaded {
        crate::wasm::load::Loaded::Contract(loaded) => {
            let loaded = *loaded;
            wasm.code().admit(code, loaded.pre, loaded.code_bytes);
            let schemas = Schemas {
                input: loaded.schema,
                output: loaded.output,
            };
            Compiled::Contract(Box::new((loaded.info, loaded.offers, schemas)))
        }
        crate::wasm::load::Loaded::Provider(provider) => {
            wasm.code().admit(code, provider.pre, provider.code_bytes);
            Compiled::Provider(provider.offers)
        }
        crate::wasm::load::Loaded::Typed(typed) => {
            wasm.code().admit(code, typed.pre, typed.code_bytes);
            Compiled::Typed(typed.reflected)
        }
    }
}

/// Load the code of every wasm tool now (not on its first call); what fails goes to `errors`.
pub(super) async fn prepare_all(
    wasm: &WasmExecutor,
    tools: &[Arc<Tool>],
    errors: &mut Vec<LoadError>,
) {
    for tool in tools {
        if let Executable::Wasm(code) | Executable::Typed(code, _) | Executable::Offer(code, _) =
            &tool.executable
            && let Err(message) = wasm.prepare(code).await
        {
            errors.push(LoadError {
                source: tool.source.clone(),
                message,
                guest_stderr: String::new(),
            });
        }
    }
}
