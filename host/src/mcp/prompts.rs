//! A plugin's prompts in MCP's shapes: as `prompts/list` shows them, and
//! the messages `prompts/get` answers.

use rmcp::model::{Prompt, PromptArgument, PromptMessage, Role};

use crate::bindings::exports::mcphost::plugin::prompts::{Message, Role as PluginRole};
use crate::bindings::mcphost::plugin::types::CapabilityError;

/// A declared prompt as listed.
pub fn listed(p: &crate::bindings::Prompt) -> Prompt {
    let arguments = p
        .arguments
        .iter()
        .map(|a| {
            let mut arg = PromptArgument::new(a.name.clone());
            arg.description = a.description.clone();
            arg.required = Some(a.required);
            arg
        })
        .collect();
    let mut prompt = Prompt::new(p.name.clone(), p.description.clone(), Some(arguments));
    prompt.title = p.title.clone();
    prompt
}

/// A filled prompt's messages; the first content block that is not valid
/// (see [`crate::caps::content::to_mcp`]) fails them all.
pub fn messages(
    filled: Vec<Message>,
    own_scheme: Option<&str>,
) -> Result<Vec<PromptMessage>, CapabilityError> {
    filled
        .into_iter()
        .map(|m| {
            let content = crate::caps::content::to_mcp(m.content, own_scheme)?;
            let role = match m.role {
                PluginRole::User => Role::User,
                PluginRole::Assistant => Role::Assistant,
            };
            Ok(PromptMessage::new(role, content))
        })
        .collect()
}
