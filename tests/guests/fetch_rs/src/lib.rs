//! A web fetcher as the ecosystem writes one: a world exporting `fetch`, built with
//! wit-bindgen, calling `wasi:http/outgoing-handler` (through the `wasi` crate) and reading a
//! token from `wasi:config/store`, no toolcell crate or WIT. Which hosts it reaches and which
//! keys it reads are the host's to say (a `policy.yaml` beside it).

wit_bindgen::generate!({ world: "fetcher", path: "wit", generate_all });

use ::wasi::http::outgoing_handler;
use ::wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use ::wasi::io::streams::StreamError;

/// The most of a body it returns.
const MAX_BODY_BYTES: usize = 1 << 20;

struct Fetcher;

impl Guest for Fetcher {
    fn fetch(url: String) -> Result<String, String> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else {
            return Err(format!("{url}: not an http or https URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        let headers = Fields::new();
        let token = wasi::config::store::get("API_TOKEN")
            .map_err(|error| format!("reading the token: {error:?}"))?;
        if let Some(token) = token {
            headers
                .append("authorization", format!("Bearer {token}").as_bytes())
                .map_err(|error| format!("{error:?}"))?;
        }
        let request = OutgoingRequest::new(headers);
        let _ = request.set_method(&Method::Get);
        let _ = request.set_scheme(Some(&scheme));
        request
            .set_authority(Some(authority))
            .map_err(|()| format!("{url}: not a host"))?;
        request
            .set_path_with_query(Some(path))
            .map_err(|()| format!("{url}: not a path"))?;
        let body = request.body().map_err(|()| "no request body".to_owned())?;
        let pending =
            outgoing_handler::handle(request, None).map_err(|error| format!("{url}: {error}"))?;
        OutgoingBody::finish(body, None).map_err(|error| format!("{url}: {error}"))?;
        let response = loop {
            match pending.get() {
                Some(answer) => break answer,
                None => pending.subscribe().block(),
            }
        };
        let response = response
            .map_err(|()| "the response was taken twice".to_owned())?
            .map_err(|error| format!("{url}: {error}"))?;
        let status = response.status();
        let incoming = response
            .consume()
            .map_err(|()| "no response body".to_owned())?;
        let stream = incoming
            .stream()
            .map_err(|()| "no response body stream".to_owned())?;
        let mut bytes = Vec::new();
        while bytes.len() < MAX_BODY_BYTES {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(error)) => {
                    return Err(format!("{url}: {}", error.to_debug_string()));
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if status >= 400 {
            return Err(format!("{url}: HTTP {status}: {text}"));
        }
        Ok(text)
    }
}

export!(Fetcher);
