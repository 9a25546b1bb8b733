//! A fixture of the MCP conformance suite's tasks extension (`tasks-mrtr-composition`,
//! SEP-2663): asks the person their name (key `user_name`), then works for two seconds and greets
//! them. Its first call ends asking (`input_required`, no task); sent again with the answer, it
//! works long enough to become a task (the operator's policy requires one), whose result names
//! them. See `tests/src/conformance.rs`.

use asking::{form, said};
use toolcell_guest::client;

asking::fixture!(
    "test_tool_with_task",
    "Asks the person their name, works for two seconds, and greets them.",
    [Elicit],
    {
        let name = said(client::elicit(
            "user_name",
            "What is your name?",
            &form("name"),
        ))?;
        std::thread::sleep(std::time::Duration::from_secs(2));
        Ok(format!("Hello, {name}!"))
    }
);
