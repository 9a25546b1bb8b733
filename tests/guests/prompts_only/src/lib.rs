//! A component that exports `toolcell:tool@0.4.0`'s `prompts` interface and nothing else (no
//! tool, no resources, no completion), built against a world of its own as an author who needs
//! only prompts would: one prompt, named as the offers fixture's prompt with arguments, which
//! that component also completes. See `tests/src/offers.rs`.

wit_bindgen::generate!({
    inline: "
        package test:prompts-only;
        world prompts-only {
            export toolcell:tool/prompts@0.4.0;
        }
    ",
    path: "../../../wit",
    world: "test:prompts-only/prompts-only",
    generate_all,
});

use exports::toolcell::tool::prompts::{Argument, Guest, Message, Prompt, PromptInfo, Role};
use toolcell::tool::types::{Part, ToolError};

struct Only;

impl Guest for Only {
    fn list_prompts() -> Vec<PromptInfo> {
        let argument = |name: &str| Argument {
            name: name.to_owned(),
            title: None,
            description: None,
            required: true,
        };
        vec![PromptInfo {
            name: "test_prompt_with_arguments".to_owned(),
            title: None,
            description: Some("The same name, from a component that completes nothing.".to_owned()),
            arguments: vec![argument("arg1"), argument("arg2")],
            client_needs: Vec::new(),
        }]
    }

    fn get(_: String, arguments: Vec<(String, String)>) -> Result<Prompt, ToolError> {
        let said: Vec<String> = arguments
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Ok(Prompt {
            description: None,
            messages: vec![Message {
                role: Role::User,
                content: Part::Text(format!("prompts-only: {}", said.join(", "))),
            }],
        })
    }
}

export!(Only);
