//! A file reader as the ecosystem writes one: a world of plain exported functions, built with
//! wit-bindgen and the standard library's file system (`wasi:filesystem` underneath), no
//! toolcell crate or WIT. What it may reach is the host's to say (a `policy.yaml` beside it).

wit_bindgen::generate!({ world: "files", path: "wit" });

struct Files;

impl Guest for Files {
    fn read_file(path: String) -> Result<String, String> {
        std::fs::read_to_string(&path).map_err(|error| format!("{path}: {error}"))
    }

    fn list_directory(path: String) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(&path).map_err(|error| format!("{path}: {error}"))?;
        let mut names: Vec<String> = entries
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn write_file(path: String, content: String) -> Result<String, String> {
        std::fs::write(&path, &content).map_err(|error| format!("{path}: {error}"))?;
        Ok(format!("wrote {} bytes to {path}", content.len()))
    }
}

export!(Files);
