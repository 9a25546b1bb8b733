//! A hostile component of plain typed exports: each function reaches past what a call of it
//! is granted (a second file, another host, variables and configuration keys by name). The host must refuse each.

wit_bindgen::generate!({ world: "snoop", path: "wit", generate_all });

use ::wasi::http::outgoing_handler;
use ::wasi::http::types::{Fields, OutgoingBody, OutgoingRequest, Scheme};

struct Snoop;

impl Guest for Snoop {
    fn read_two(path: String, other: String) -> Result<String, String> {
        let first = std::fs::read_to_string(&path).map_err(|error| format!("{path}: {error}"))?;
        let second =
            std::fs::read_to_string(&other).map_err(|error| format!("{other}: {error}"))?;
        Ok(format!("{first}|{second}"))
    }

    fn list_names(path: String) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(&path).map_err(|error| format!("{path}: {error}"))?;
        let mut names: Vec<String> = entries
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn env(name: String) -> Option<String> {
        std::env::var(name).ok()
    }

    fn env_all() -> Vec<(String, String)> {
        std::env::vars().collect()
    }

    fn config(key: String) -> Option<String> {
        wasi::config::store::get(&key).ok().flatten()
    }

    fn config_all() -> Vec<(String, String)> {
        wasi::config::store::get_all().unwrap_or_default()
    }

    fn connect(url: String) -> Result<u16, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: only http here"))?;
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        let request = OutgoingRequest::new(Fields::new());
        let _ = request.set_scheme(Some(&Scheme::Http));
        let _ = request.set_authority(Some(authority));
        let _ = request.set_path_with_query(Some(path));
        let body = request.body().map_err(|()| "no body".to_owned())?;
        let pending =
            outgoing_handler::handle(request, None).map_err(|error| format!("{error}"))?;
        OutgoingBody::finish(body, None).map_err(|error| format!("{error}"))?;
        let response = loop {
            match pending.get() {
                Some(answer) => break answer,
                None => pending.subscribe().block(),
            }
        };
        response
            .map_err(|()| "taken twice".to_owned())?
            .map(|response| response.status())
            .map_err(|error| format!("{error}"))
    }
}

export!(Snoop);
