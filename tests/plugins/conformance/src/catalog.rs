//! The conformance suite's resources, resource list, prompts and
//! completions.

use plugin_sdk::completion::{self, Reference};
use plugin_sdk::content::{Block, EmbeddedResource, ResourceBody};
use plugin_sdk::prompts::{Argument, Filled, Message, Prompt, Role};
use plugin_sdk::resource_list::{self, Contents as ListedContents, Resource};
use plugin_sdk::resources::{Contents, ResourceTemplate};
use plugin_sdk::{ToolError, prompts, resources};

use crate::asking::{ask_all, form};
use crate::{RED_PIXEL, image};

/// The suite's listed resources: text, binary, and one to watch.
pub struct Listed;

fn listed(uri: &str, name: &str, mime_type: &str) -> Resource {
    Resource {
        uri: uri.into(),
        name: name.into(),
        title: None,
        description: Some(format!("The {name} of the conformance suite.")),
        mime_type: Some(mime_type.into()),
        size: None,
    }
}

impl resource_list::Guest for Listed {
    fn list() -> Vec<Resource> {
        vec![
            listed("test://static-text", "static text", "text/plain"),
            listed("test://static-binary", "static binary", "image/png"),
            listed("test://watched-resource", "watched resource", "text/plain"),
        ]
    }

    fn read(uri: String) -> Result<ListedContents, ToolError> {
        let (mime, body) = match uri.as_str() {
            "test://static-binary" => ("image/png", ResourceBody::Blob(RED_PIXEL.to_vec())),
            "test://watched-resource" => (
                "text/plain",
                ResourceBody::Text("Watched resource content.".into()),
            ),
            _ => {
                let read = <TestResources as resources::Guest>::read(uri)?;
                return Ok(ListedContents {
                    uri: read.uri,
                    mime_type: Some(read.mime_type),
                    body: ResourceBody::Text(read.text),
                });
            }
        };
        Ok(ListedContents {
            uri,
            mime_type: Some(mime.into()),
            body,
        })
    }
}

/// Completes `arg1` of `test_prompt_with_arguments` from a few words.
pub struct Completion;
impl completion::Guest for Completion {
    fn complete(
        reference: Reference,
        argument: String,
        value: String,
        _: Vec<(String, String)>,
    ) -> Vec<String> {
        let words = ["paris", "park", "party", "test", "testing"];
        match reference {
            Reference::Prompt(name)
                if name == "test_prompt_with_arguments" && argument == "arg1" =>
            {
                words
                    .iter()
                    .filter(|w| w.starts_with(&value))
                    .map(|w| w.to_string())
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The suite's text resources: `test://static-text` and the template
/// `test://template/{id}/data`.
pub struct TestResources;
impl resources::Guest for TestResources {
    fn templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "test://template/{id}/data".into(),
            name: "Template data".into(),
            description: "Data for one id.".into(),
            mime_type: "application/json".into(),
        }]
    }

    fn read(uri: String) -> Result<Contents, ToolError> {
        if uri == "test://static-text" {
            return Ok(Contents {
                uri,
                mime_type: "text/plain".into(),
                text: "This is the content of the static text resource.".into(),
            });
        }
        let id = uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .ok_or_else(|| ToolError::new("not_found", format!("no resource {uri}")))?;
        let text = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        Ok(Contents {
            uri,
            mime_type: "application/json".into(),
            text: text.to_string(),
        })
    }
}

/// The suite's prompts: plain, with arguments, with a resource, with an
/// image.
pub struct TestPrompts;

fn prompt(name: &str, description: &str, arguments: &[(&str, &str)]) -> Prompt {
    Prompt {
        name: name.into(),
        title: None,
        description: Some(description.into()),
        arguments: arguments
            .iter()
            .map(|(name, description)| Argument {
                name: (*name).into(),
                description: Some((*description).into()),
                required: true,
            })
            .collect(),
    }
}

fn user(content: Block) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

impl prompts::Guest for TestPrompts {
    fn list() -> Vec<Prompt> {
        vec![
            prompt("test_simple_prompt", "A prompt without arguments.", &[]),
            prompt(
                "test_prompt_with_arguments",
                "A prompt with two arguments.",
                &[
                    ("arg1", "First test argument"),
                    ("arg2", "Second test argument"),
                ],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "A prompt with a resource inline.",
                &[("resourceUri", "URI of the resource to embed")],
            ),
            prompt("test_prompt_with_image", "A prompt with an image.", &[]),
            prompt(
                "test_input_required_result_prompt",
                "A prompt that asks the person for its context first.",
                &[],
            ),
        ]
    }

    fn get(name: String, arguments: Vec<(String, String)>) -> Result<Filled, ToolError> {
        let arg = |key: &str| {
            arguments
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let text = |t: &str| Block::Text(t.into());
        let messages = match name.as_str() {
            "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
            "test_prompt_with_arguments" => vec![user(text(&format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            )))],
            "test_prompt_with_embedded_resource" => vec![
                user(Block::Embedded(EmbeddedResource {
                    uri: arg("resourceUri"),
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("Embedded resource content for testing.".into()),
                })),
                user(text("Please process the embedded resource above.")),
            ],
            "test_prompt_with_image" => {
                vec![user(image()), user(text("Please analyze the image above."))]
            }
            "test_input_required_result_prompt" => {
                let context = ask_all(vec![(
                    "user_context",
                    form("What context should the prompt use?", "context", "string"),
                )])?;
                vec![user(text(&format!(
                    "Use this context: {}",
                    context.join("")
                )))]
            }
            _ => return Err(ToolError::new("not_found", format!("no prompt {name}"))),
        };
        Ok(Filled {
            description: None,
            messages,
        })
    }
}
