//! A fixture of the MCP conformance suite's tasks extension (`tasks-mrtr-input`, SEP-2663):
//! asks the person to confirm before it "deletes" (it deletes nothing: it says what it would
//! have done). As a task, it waits `input_required` for the answer (`tasks/update`), and
//! runs again, in a fresh instance, with it. See `tests/src/conformance.rs`.

use asking::said;
use toolcell_guest::client;

asking::fixture!(
    "confirm_delete",
    "Asks the person to confirm, then says whether it deleted.",
    [Elicit],
    {
        let answer = said(client::elicit(
            "confirm",
            "Delete it?",
            &serde_json::json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean" } },
                "required": ["confirm"]
            }),
        ))?;
        let confirmed = serde_json::from_str::<serde_json::Value>(&answer)
            .ok()
            .and_then(|form| form.get("confirm").and_then(serde_json::Value::as_bool))
            .unwrap_or(false);
        Ok(if confirmed {
            "Deleted.".to_owned()
        } else {
            "Not deleted: the person did not confirm.".to_owned()
        })
    }
);
