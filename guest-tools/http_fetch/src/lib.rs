//! `http_fetch`: one HTTP request through `wasi:http`, following redirects; the host decides,
//! request by request, which hosts it may reach.

mod logic;

use logic::{parse, resolve};
use serde::Deserialize;
use std::collections::BTreeMap;
use toolcell_guest::{CapabilityKind, Info, Tool, ToolError};
use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasi::io::streams::StreamError;

/// How many bytes of the body a call returns when it does not say.
const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// How long to wait for the connection and for the first byte, when the call does not say.
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// How many redirects a call follows.
const MAX_REDIRECTS: usize = 5;
/// The most bytes one `wasi:io` write may carry.
const WRITE_CHUNK: usize = 4096;

struct HttpFetch;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
    #[serde(default = "get")]
    method: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Option<String>,
    max_bytes: Option<usize>,
    timeout_ms: Option<u64>,
}

fn get() -> String {
    "GET".to_owned()
}

impl Tool for HttpFetch {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "http_fetch",
            "Make an HTTP request and return the status, headers and body (text). Follows up to \
             5 redirects. Only hosts the policy allows can be reached.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "url": { "type": "string", "description": "An http:// or https:// URL." },
                    "method": { "type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], "description": "Default GET." },
                    "headers": { "type": "object", "additionalProperties": { "type": "string" } },
                    "body": { "type": "string", "description": "The request body." },
                    "max_bytes": { "type": "integer", "minimum": 1, "description": "The most body bytes to return (default 262144)." },
                    "timeout_ms": { "type": "integer", "minimum": 1, "description": "Connect and first-byte timeout (default 10000)." }
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        );
        info.concurrency_safe = true;
        info.capabilities = vec![toolcell_guest::capability_from_argument(
            CapabilityKind::Network,
            "/url",
        )];
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let max_bytes = args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        let timeout_ns = args
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .saturating_mul(1_000_000);
        let mut url = args.url.clone();
        let mut method = args.method.to_ascii_uppercase();
        let mut body = args.body.clone();
        for _ in 0..=MAX_REDIRECTS {
            let response = send(
                &url,
                &method,
                &args.headers,
                body.as_deref(),
                timeout_ns,
                max_bytes,
            )?;
            match (response.status, response.location.as_deref()) {
                (301 | 302 | 303 | 307 | 308, Some(location)) => {
                    url = resolve(&url, location).map_err(ToolError::InvalidInput)?;
                    if response.status == 303
                        || (response.status != 307 && response.status != 308 && method == "POST")
                    {
                        method = "GET".to_owned();
                        body = None;
                    }
                }
                _ => return Ok(response.render()),
            }
        }
        Err(ToolError::Failed(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    location: Option<String>,
    body: Vec<u8>,
    truncated: bool,
}

impl Response {
    fn render(&self) -> String {
        let mut out = format!("status: {}\n", self.status);
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\n"));
        }
        out.push('\n');
        out.push_str(&String::from_utf8_lossy(&self.body));
        if self.truncated {
            out.push_str(&format!("\n[truncated at {} bytes]", self.body.len()));
        }
        out
    }
}

fn method_of(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "PATCH" => Method::Patch,
        "DELETE" => Method::Delete,
        other => Method::Other(other.to_owned()),
    }
}

fn failed(what: &str) -> ToolError {
    ToolError::Failed(what.to_owned())
}

fn from_error_code(url: &str, error: ErrorCode) -> ToolError {
    match error {
        ErrorCode::HttpRequestDenied => {
            ToolError::Denied(format!("{url}: the host is not one this call may reach"))
        }
        ErrorCode::DestinationIpProhibited => ToolError::Denied(format!(
            "{url}: it resolves to a private or local address the policy does not name"
        )),
        other => ToolError::Failed(format!("{url}: {other:?}")),
    }
}

fn send(
    url: &str,
    method: &str,
    headers: &BTreeMap<String, String>,
    body: Option<&str>,
    timeout_ns: u64,
    max_bytes: usize,
) -> Result<Response, ToolError> {
    let target = parse(url).map_err(ToolError::InvalidInput)?;
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(&name.to_ascii_lowercase(), value.as_bytes())
            .map_err(|e| ToolError::InvalidInput(format!("header {name}: {e:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    request
        .set_method(&method_of(method))
        .map_err(|()| ToolError::InvalidInput(format!("method {method}")))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| failed("scheme"))?;
    request
        .set_authority(Some(&target.authority))
        .map_err(|()| ToolError::InvalidInput(format!("{url}: bad host")))?;
    request
        .set_path_with_query(Some(&target.path))
        .map_err(|()| ToolError::InvalidInput(format!("{url}: bad path")))?;
    let outgoing = request.body().map_err(|()| failed("request body"))?;
    if let Some(body) = body {
        let stream = outgoing
            .write()
            .map_err(|()| failed("request body stream"))?;
        for chunk in body.as_bytes().chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| ToolError::Failed(format!("writing the body: {e:?}")))?;
        }
        drop(stream);
    }
    let options = RequestOptions::new();
    let _ = options.set_connect_timeout(Some(timeout_ns));
    let _ = options.set_first_byte_timeout(Some(timeout_ns));
    let pending =
        outgoing_handler::handle(request, Some(options)).map_err(|e| from_error_code(url, e))?;
    OutgoingBody::finish(outgoing, None).map_err(|e| from_error_code(url, e))?;
    let response = loop {
        match pending.get() {
            Some(result) => break result,
            None => pending.subscribe().block(),
        }
    };
    let response = response
        .map_err(|()| failed("the response was taken twice"))?
        .map_err(|e| from_error_code(url, e))?;
    let status = response.status();
    let mut location = None;
    let mut shown = Vec::new();
    for (name, value) in response.headers().entries() {
        let value = String::from_utf8_lossy(&value).into_owned();
        if name.eq_ignore_ascii_case("location") {
            location = Some(value.clone());
        }
        shown.push((name, value));
    }
    let incoming = response.consume().map_err(|()| failed("response body"))?;
    let stream = incoming
        .stream()
        .map_err(|()| failed("response body stream"))?;
    let mut body = Vec::new();
    let mut truncated = false;
    loop {
        let room = max_bytes.saturating_sub(body.len());
        if room == 0 {
            truncated = true;
            break;
        }
        match stream.blocking_read(room.min(64 * 1024) as u64) {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(ToolError::Failed(format!(
                    "{url}: reading the body: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    Ok(Response {
        status,
        headers: shown,
        location,
        body,
        truncated,
    })
}

toolcell_guest::export_tool!(HttpFetch);
