//! The host bindings generated from `wit/`. The only module that calls `bindgen!`; everything
//! else speaks the host's own types ([`ToolInfo`](crate::ToolInfo), [`Part`]).
//!
//! Four versions of the contract load: `toolcell:tool@0.4.0` (`wit/`: the types in their own
//! interface, client needs, and the `client` import), 0.3.0 (results of parts), 0.2.0 (one
//! string, and an output schema) and 0.1.0 (one string). An older component's answers are read
//! as a new one's: its `info` without client needs or an output schema where it has none, its
//! string as one text part.

pub(crate) use crate::wasm::contract::generated;

/// The contract as it was in 0.3.0 (the types inside `tool`, no client).
mod v0_3 {
    wasmtime::component::bindgen!({
        path: "wit-0.3.0",
        world: "guest",
        exports: { default: async },
    });
}

/// The contract as it was in 0.2.0 (a result is one string).
mod v0_2 {
    wasmtime::component::bindgen!({
        path: "wit-0.2.0",
        world: "guest",
        exports: { default: async },
    });
}

/// The contract as it was in 0.1.0 (no `output-schema`, a result is one string).
mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit-0.1.0",
        world: "guest",
        exports: { default: async },
    });
}

pub(crate) use generated::exports::toolcell::tool::tool::Info;
pub(crate) use generated::toolcell::tool::types::ToolError;

use crate::call::content::{Contents, Media, Part};
use crate::tool::info::{Capability, CapabilityKind, MAX_SCHEMA_TEXT_BYTES, ResourceRef, ToolInfo};
use crate::tool::offer::Answered;
use crate::wasm::offering::OfferingPre;
use generated::toolcell::tool::types as wit;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::component::InstancePre;
use wasmtime::{AsContextMut, Result};

/// A component ready to instantiate, by the version of the contract it exports.
pub(crate) enum GuestPre<T: 'static> {
    /// `toolcell:tool@0.4.0`, the current contract.
    Current(Contract<T>),
    /// `toolcell:tool@0.3.0`.
    V0_3(v0_3::GuestPre<T>),
    /// `toolcell:tool@0.2.0`.
    V0_2(v0_2::GuestPre<T>),
    /// `toolcell:tool@0.1.0`.
    V0_1(v0_1::GuestPre<T>),
    /// No contract: plain WIT-typed exports, each function a tool (`wasm/typed/`).
    Typed(crate::wasm::typed::TypedPre<T>),
    /// `toolcell:tool@0.4.0`'s prompts, resources or completion, with its tool or without.
    Offering(Box<Offering<T>>),
}

/// A component that offers prompts, resources or completion: those interfaces, and its tool
/// if it exports one too (the `server` world).
pub(crate) struct Offering<T: 'static> {
    pub(crate) offers: OfferingPre<T>,
    pub(crate) tool: Option<Contract<T>>,
}

/// The interface of the current contract's tool, as a component exports it.
const TOOL_INTERFACE: &str = "toolcell:tool/tool@0.4.0";

/// A component of the current contract, ready to instantiate: its generated bindings, and its
/// `call` export found once, here, rather than on every instance (the bindings find and type
/// check every function of the interface for each instance; a call needs one), and type
/// checked once, on its first instance.
pub(crate) struct Contract<T: 'static> {
    pre: generated::GuestPre<T>,
    call: wasmtime::component::ComponentExportIndex,
    /// `call`'s type was checked against the contract's, on an instance of this component
    /// (shared by the clones, which are of the same component).
    checked: Arc<AtomicBool>,
}

impl<T: 'static> Clone for Contract<T> {
    fn clone(&self) -> Self {
        Contract {
            pre: self.pre.clone(),
            call: self.call,
            checked: Arc::clone(&self.checked),
        }
    }
}

/// The contract's `call`, typed as the host calls it.
type CallFunc<'a> =
    wasmtime::component::TypedFunc<(&'a str,), (std::result::Result<Vec<wit::Part>, ToolError>,)>;

impl<T: Send + 'static> Contract<T> {
    fn new(instance_pre: InstancePre<T>) -> Result<Contract<T>> {
        let component = instance_pre.component();
        let call = component
            .get_export_index(None, TOOL_INTERFACE)
            .and_then(|interface| component.get_export_index(Some(&interface), "call"))
            .ok_or_else(|| wasmtime::format_err!("no `call` in {TOOL_INTERFACE}"))?;
        let pre = generated::GuestPre::new(instance_pre)?;
        Ok(Contract {
            pre,
            call,
            checked: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A fresh instance in `store`, and its `call(arguments)`. The function's type is checked
    /// against the contract's on the component's first instance (safe code: a component whose
    /// export has another type is an error, never a misread); its later instances, of the same
    /// component, are not checked again (see [`Contract::typed_call`]).
    async fn call(
        &self,
        mut store: impl AsContextMut<Data = T>,
        arguments: &str,
    ) -> Result<std::result::Result<Vec<wit::Part>, ToolError>> {
        let instance = self
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await?;
        let call = self.typed_call(&mut store, &instance)?;
        let (answer,) = call.call_async(&mut store, (arguments,)).await?;
        Ok(answer)
    }

    /// `call` of `instance`, typed: checked the first time, trusted after.
    #[allow(unsafe_code)]
    fn typed_call<'a>(
        &self,
        mut store: impl AsContextMut<Data = T>,
        instance: &wasmtime::component::Instance,
    ) -> Result<CallFunc<'a>> {
        let func = instance
            .get_func(&mut store, self.call)
            .ok_or_else(|| wasmtime::format_err!("no `call` in {TOOL_INTERFACE}"))?;
        if self.checked.load(Ordering::Acquire) {
            // SAFETY: `TypedFunc::new_unchecked` requires the function to have this type.
            // This `call` was type checked (`Func::typed`, below) on an instance of this very
            // component: `self.call` and the component are fixed for this `Contract` and its
            // clones, and a component function's type is read from the component's type
            // tables, the same for every instance. The one part of a type that differs per
            // instance, a resource type, is not in this signature (a string in, a result of a
            // list of parts or an error out: records, variants, strings and bytes).
            return Ok(unsafe { wasmtime::component::TypedFunc::new_unchecked(func) });
        }
        let typed = func.typed(store.as_context())?;
        self.checked.store(true, Ordering::Release);
        Ok(typed)
    }
}

impl<T: 'static> Clone for GuestPre<T> {
    fn clone(&self) -> Self {
        match self {
            GuestPre::Current(pre) => GuestPre::Current(pre.clone()),
            GuestPre::V0_3(pre) => GuestPre::V0_3(pre.clone()),
            GuestPre::V0_2(pre) => GuestPre::V0_2(pre.clone()),
            GuestPre::V0_1(pre) => GuestPre::V0_1(pre.clone()),
            GuestPre::Typed(pre) => GuestPre::Typed(pre.clone()),
            GuestPre::Offering(offering) => GuestPre::Offering(Box::new(Offering {
                offers: offering.offers.clone(),
                tool: offering.tool.clone(),
            })),
        }
    }
}

/// The current contract's capability, from an older version's (the same cases, another
/// generated type).
macro_rules! capabilities_from {
    ($version:ident, $capabilities:expr) => {{
        use $version::exports::toolcell::tool::tool::{CapabilityKind as Kind, ResourceRef as Ref};
        $capabilities
            .into_iter()
            .map(|capability| wit::Capability {
                kind: match capability.kind {
                    Kind::FilesystemRead => wit::CapabilityKind::FilesystemRead,
                    Kind::FilesystemWrite => wit::CapabilityKind::FilesystemWrite,
                    Kind::Network => wit::CapabilityKind::Network,
                    Kind::Env => wit::CapabilityKind::Env,
                    Kind::Clock => wit::CapabilityKind::Clock,
                },
                target: match capability.target {
                    Ref::Argument(pointer) => wit::ResourceRef::Argument(pointer),
                    Ref::Fixed(resource) => wit::ResourceRef::Fixed(resource),
                    Ref::Whole => wit::ResourceRef::Whole,
                },
            })
            .collect()
    }};
}

/// The current contract's `info`, from an older version's `$info`: its output schema is
/// `$output` (an older version may have none), and it needs nothing of its client.
macro_rules! info_from {
    ($version:ident, $info:ident, $output:expr) => {
        Info {
            capabilities: capabilities_from!($version, $info.capabilities),
            output_schema: $output,
            name: $info.name,
            description: $info.description,
            input_schema: $info.input_schema,
            read_only: $info.read_only,
            concurrency_safe: $info.concurrency_safe,
            client_needs: Vec::new(),
        }
    };
}

/// The current contract's tool error, from an older version's.
macro_rules! tool_error_from {
    ($version:ident, $error:expr) => {{
        use $version::exports::toolcell::tool::tool::ToolError as Old;
        match $error {
            Old::InvalidInput(message) => ToolError::InvalidInput(message),
            Old::NotFound(message) => ToolError::NotFound(message),
            Old::Denied(message) => ToolError::Denied(message),
            Old::Failed(message) => ToolError::Failed(message),
        }
    }};
}

impl<T: Send + 'static> GuestPre<T> {
    /// The component behind `instance_pre`, if it exports any version of the contract (the
    /// newest is tried first). The error is the current version's.
    pub(crate) fn new(instance_pre: InstancePre<T>) -> Result<GuestPre<T>> {
        if let Some(offers) = OfferingPre::new(&instance_pre) {
            let tool = Contract::new(instance_pre).ok();
            return Ok(GuestPre::Offering(Box::new(Offering { offers, tool })));
        }
        let current = match Contract::new(instance_pre.clone()) {
            Ok(pre) => return Ok(GuestPre::Current(pre)),
            Err(error) => error,
        };
        if let Ok(pre) = v0_3::GuestPre::new(instance_pre.clone()) {
            return Ok(GuestPre::V0_3(pre));
        }
        if let Ok(pre) = v0_2::GuestPre::new(instance_pre.clone()) {
            return Ok(GuestPre::V0_2(pre));
        }
        match v0_1::GuestPre::new(instance_pre) {
            Ok(pre) => Ok(GuestPre::V0_1(pre)),
            Err(_) => Err(current),
        }
    }

    /// The current contract's tool, if the component exports one.
    fn current(&self) -> Result<&Contract<T>> {
        match self {
            GuestPre::Current(pre) => Ok(pre),
            GuestPre::Offering(offering) => offering.tool.as_ref().ok_or_else(|| {
                wasmtime::format_err!("the component offers prompts or resources, and no tool")
            }),
            _ => Err(wasmtime::format_err!(
                "the component exports an older version of the contract"
            )),
        }
    }

    /// The prompts, resources and completion it offers, if any.
    pub(crate) fn offering(&self) -> Option<&Offering<T>> {
        match self {
            GuestPre::Offering(offering) => Some(offering),
            _ => None,
        }
    }

    /// Instantiate it in `store` and call `describe()`.
    pub(crate) async fn describe(&self, mut store: impl AsContextMut<Data = T>) -> Result<Info> {
        match self {
            GuestPre::Current(_) | GuestPre::Offering(_) => {
                let guest = self.current()?.pre.instantiate_async(&mut store).await?;
                guest.toolcell_tool_tool().call_describe(&mut store).await
            }
            GuestPre::V0_3(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let info = guest.toolcell_tool_tool().call_describe(&mut store).await?;
                Ok(info_from!(v0_3, info, info.output_schema))
            }
            GuestPre::V0_2(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let info = guest.toolcell_tool_tool().call_describe(&mut store).await?;
                Ok(info_from!(v0_2, info, info.output_schema))
            }
            GuestPre::V0_1(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let info = guest.toolcell_tool_tool().call_describe(&mut store).await?;
                Ok(info_from!(v0_1, info, None))
            }
            // Described by its types at load (`wasm/typed/`), never asked.
            GuestPre::Typed(_) => Err(wasmtime::format_err!(
                "a component of plain typed exports has no describe()"
            )),
        }
    }

    /// Instantiate it in `store` and run `call(arguments)`: the parts it answered (an older
    /// component's string is one text part), or its error.
    pub(crate) async fn call(
        &self,
        mut store: impl AsContextMut<Data = T>,
        arguments: &str,
    ) -> Result<std::result::Result<Vec<Part>, ToolError>> {
        match self {
            GuestPre::Current(_) | GuestPre::Offering(_) => {
                let answer = self.current()?.call(&mut store, arguments).await?;
                Ok(answer.map(|parts| parts.into_iter().map(Part::from).collect()))
            }
            GuestPre::V0_3(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let answer = guest
                    .toolcell_tool_tool()
                    .call_call(&mut store, arguments)
                    .await?;
                Ok(answer
                    .map(|parts| parts.into_iter().map(part_from_v0_3).collect())
                    .map_err(|error| tool_error_from!(v0_3, error)))
            }
            GuestPre::V0_2(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let answer = guest
                    .toolcell_tool_tool()
                    .call_call(&mut store, arguments)
                    .await?;
                Ok(answer
                    .map(|text| vec![Part::text(text)])
                    .map_err(|error| tool_error_from!(v0_2, error)))
            }
            GuestPre::V0_1(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let answer = guest
                    .toolcell_tool_tool()
                    .call_call(&mut store, arguments)
                    .await?;
                Ok(answer
                    .map(|text| vec![Part::text(text)])
                    .map_err(|error| tool_error_from!(v0_1, error)))
            }
            // Each of its functions is its own tool, called by `call_typed`.
            GuestPre::Typed(_) => Err(wasmtime::format_err!(
                "a component of plain typed exports is called one function at a time"
            )),
        }
    }

    /// Instantiate it in `store` and run `what` with `arguments`: the parts it answered, and,
    /// for a request of its offers, what they are.
    pub(crate) async fn run(
        &self,
        mut store: impl AsContextMut<Data = T>,
        what: What<'_>,
        arguments: &str,
    ) -> Result<std::result::Result<(Vec<Part>, Option<Answered>), ToolError>> {
        match (self, what) {
            (GuestPre::Typed(pre), What::Function(function)) => {
                use crate::wasm::typed::ToolError as Typed;
                Ok(pre
                    .call(store, function, arguments)
                    .await?
                    .map(|parts| (parts, None))
                    .map_err(|error| match error {
                        Typed::InvalidInput(why) => ToolError::InvalidInput(why),
                        Typed::Failed(why) => ToolError::Failed(why),
                    }))
            }
            (GuestPre::Offering(offering), What::Offer(operation)) => Ok(offering
                .offers
                .run(&mut store, operation, arguments)
                .await?
                .map(|(parts, answered)| (parts, Some(answered)))),
            (GuestPre::Typed(_), _) => Err(wasmtime::format_err!(
                "a component of plain typed exports is called one function at a time"
            )),
            (_, What::Offer(_)) => Err(wasmtime::format_err!(
                "the component offers no prompts, resources or completion"
            )),
            (_, What::Call | What::Function(_)) => Ok(self
                .call(store, arguments)
                .await?
                .map(|parts| (parts, None))),
        }
    }
}

/// What a fresh instance of a component runs.
#[derive(Clone, Copy)]
pub(crate) enum What<'a> {
    /// The contract's `call`.
    Call,
    /// One function of a component of plain typed exports.
    Function(&'a crate::wasm::typed::TypedFunction),
    /// A request of its prompts, resources or completion.
    Offer(&'a crate::wasm::offering::Operation),
}

/// The host's part, from a guest's of `$module` (0.4.0's `types`, 0.3.0's `tool`): the same
/// cases, another generated type.
macro_rules! part_from {
    ($module:path, $part:expr) => {{
        use $module as version;
        let media = |media: version::Media| Media {
            mime_type: media.mime_type,
            data: Arc::from(media.data),
        };
        match $part {
            version::Part::Text(text) => Part::Text { text },
            version::Part::Image(image) => Part::Image(media(image)),
            version::Part::Audio(audio) => Part::Audio(media(audio)),
            version::Part::Resource(resource) => Part::Resource {
                uri: resource.uri,
                mime_type: resource.mime_type,
                contents: match resource.contents {
                    version::ResourceContents::Text(text) => Contents::Text(text),
                    version::ResourceContents::Blob(blob) => Contents::Blob(Arc::from(blob)),
                },
            },
            version::Part::ResourceLink(link) => Part::ResourceLink {
                uri: link.uri,
                name: link.name,
                description: link.description,
                mime_type: link.mime_type,
            },
        }
    }};
}

impl From<wit::Part> for Part {
    fn from(part: wit::Part) -> Self {
        part_from!(generated::toolcell::tool::types, part)
    }
}

/// A 0.3.0 guest's part.
fn part_from_v0_3(part: v0_3::exports::toolcell::tool::tool::Part) -> Part {
    part_from!(v0_3::exports::toolcell::tool::tool, part)
}

impl From<wit::CapabilityKind> for CapabilityKind {
    fn from(kind: wit::CapabilityKind) -> Self {
        match kind {
            wit::CapabilityKind::FilesystemRead => CapabilityKind::FilesystemRead,
            wit::CapabilityKind::FilesystemWrite => CapabilityKind::FilesystemWrite,
            wit::CapabilityKind::Network => CapabilityKind::Network,
            wit::CapabilityKind::Env => CapabilityKind::Env,
            wit::CapabilityKind::Clock => CapabilityKind::Clock,
        }
    }
}

impl From<wit::Capability> for Capability {
    fn from(capability: wit::Capability) -> Self {
        Capability {
            kind: capability.kind.into(),
            target: match capability.target {
                wit::ResourceRef::Argument(pointer) => ResourceRef::Argument(pointer),
                wit::ResourceRef::Fixed(resource) => ResourceRef::Fixed(resource),
                wit::ResourceRef::Whole => ResourceRef::Whole,
            },
        }
    }
}

impl ToolInfo {
    /// Check what a guest's `describe()` returned. The error says what is wrong with it.
    pub(crate) fn from_guest(info: Info) -> Result<ToolInfo, String> {
        if info.input_schema.len() > MAX_SCHEMA_TEXT_BYTES {
            return Err(format!(
                "tool {:?}: its input schema is {} bytes of text; at most {MAX_SCHEMA_TEXT_BYTES} \
                 are read",
                info.name,
                info.input_schema.len()
            ));
        }
        let input_schema = match serde_json::from_str::<Value>(&info.input_schema) {
            Ok(schema) => schema,
            Err(error) => {
                return Err(format!(
                    "tool {:?}: its input schema is not JSON: {error}",
                    info.name
                ));
            }
        };
        let output_schema = match &info.output_schema {
            None => None,
            Some(text) if text.len() > MAX_SCHEMA_TEXT_BYTES => {
                return Err(format!(
                    "tool {:?}: its output schema is {} bytes of text; at most \
                     {MAX_SCHEMA_TEXT_BYTES} are read",
                    info.name,
                    text.len()
                ));
            }
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(schema) => Some(schema),
                Err(error) => {
                    return Err(format!(
                        "tool {:?}: its output schema is not JSON: {error}",
                        info.name
                    ));
                }
            },
        };
        let mut required_client = Vec::new();
        let mut capabilities: Vec<Capability> = info
            .capabilities
            .into_iter()
            .map(Capability::from)
            .collect();
        for need in info.client_needs {
            let kind = crate::wasm::contract::client_kind(need.feature);
            capabilities.push(Capability {
                kind,
                target: ResourceRef::Whole,
            });
            if need.required {
                required_client.push(kind);
            }
        }
        ToolInfo {
            name: info.name,
            description: info.description,
            input_schema,
            output_schema,
            read_only: info.read_only,
            concurrency_safe: info.concurrency_safe,
            capabilities,
            required_client,
        }
        .checked()
    }
}
