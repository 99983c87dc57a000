//! `host client-config CLIENT`: the snippet that adds this host to an MCP
//! client, in that client's own format (JSON or TOML, `mcpServers` or
//! `servers` or `mcp_servers`), on stdout; where it goes, on stderr.
//!
//! Clients whose model API refuses dots in tool names (`^[a-zA-Z0-9_-]+$`:
//! Claude Code, Codex, Copilot CLI; Cursor to be safe) get
//! `--underscore-names`; VS Code maps names itself and Gemini CLI takes
//! dots.

use std::collections::BTreeMap;

use clap::ValueEnum;
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` in the project (or `claude mcp add-json`).
    ClaudeCode,
    /// OpenAI Codex CLI: `~/.codex/config.toml`.
    Codex,
    /// GitHub Copilot CLI: `~/.copilot/mcp-config.json`.
    Copilot,
    /// VS Code: `.vscode/mcp.json` in the workspace.
    Vscode,
    /// Cursor: `~/.cursor/mcp.json` (or `.cursor/mcp.json` in a project).
    Cursor,
    /// Gemini CLI: `~/.gemini/settings.json`.
    Gemini,
}

/// How a client starts the host.
pub struct Launch {
    pub command: String,
    /// After `serve --stdio` (and `--underscore-names` where needed).
    pub extra_args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl Client {
    /// Whether the client, or the model API behind it, refuses tool names
    /// with dots.
    pub fn needs_underscores(self) -> bool {
        matches!(
            self,
            Client::ClaudeCode | Client::Codex | Client::Copilot | Client::Cursor
        )
    }

    /// Where the snippet goes, for a person.
    pub fn place(self) -> &'static str {
        match self {
            Client::ClaudeCode => {
                "merge it into .mcp.json at the top of your project (or give the inner object to \
                 `claude mcp add-json --scope user wasm-host '<json>'`)"
            }
            Client::Codex => "append it to ~/.codex/config.toml",
            Client::Copilot => "merge it into ~/.copilot/mcp-config.json",
            Client::Vscode => "merge it into .vscode/mcp.json in your workspace",
            Client::Cursor => "merge it into ~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            Client::Gemini => "merge it into ~/.gemini/settings.json",
        }
    }

    /// The snippet naming the host `name`.
    pub fn snippet(self, name: &str, launch: &Launch) -> String {
        let mut args = vec!["serve".to_string(), "--stdio".to_string()];
        if self.needs_underscores() {
            args.push("--underscore-names".into());
        }
        args.extend(launch.extra_args.iter().cloned());
        let (command, env) = (&launch.command, &launch.env);
        let server = match self {
            Client::Codex => {
                let mut server = toml::Table::new();
                server.insert("command".into(), command.clone().into());
                server.insert("args".into(), args.into());
                if !env.is_empty() {
                    let env: toml::Table = env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().into()))
                        .collect();
                    server.insert("env".into(), env.into());
                }
                // Long test runs and agent prompts outlast Codex's 60 s.
                server.insert("tool_timeout_sec".into(), 3600.into());
                let mut servers = toml::Table::new();
                servers.insert(name.into(), server.into());
                let mut root = toml::Table::new();
                root.insert("mcp_servers".into(), servers.into());
                return toml::to_string(&root).expect("a table serialises");
            }
            Client::ClaudeCode | Client::Vscode => {
                json!({"type": "stdio", "command": command, "args": args, "env": env})
            }
            Client::Copilot => {
                json!({"type": "local", "command": command, "args": args, "env": env, "tools": ["*"]})
            }
            Client::Cursor | Client::Gemini => {
                json!({"command": command, "args": args, "env": env})
            }
        };
        let key = match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        };
        let mut servers = serde_json::Map::new();
        servers.insert(name.to_string(), server);
        let mut root = serde_json::Map::new();
        root.insert(key.to_string(), servers.into());
        serde_json::to_string_pretty(&root).expect("JSON serialises") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            command: "/opt/mcp host/bin/host".into(),
            extra_args: vec!["--plugins".into(), "/p".into()],
            env: BTreeMap::from([(
                "GODOT_DOC_DIR".to_string(),
                "/docs/4.x:/docs/3.x".to_string(),
            )]),
        }
    }

    #[test]
    fn every_client_gets_its_own_format() {
        for client in Client::value_variants() {
            let text = client.snippet("wasm-host", &launch());
            let server = if *client == Client::Codex {
                let table: toml::Table = toml::from_str(&text).unwrap();
                serde_json::to_value(&table["mcp_servers"]["wasm-host"]).unwrap()
            } else {
                let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                let key = if *client == Client::Vscode {
                    "servers"
                } else {
                    "mcpServers"
                };
                value[key]["wasm-host"].clone()
            };
            assert_eq!(
                server["command"], "/opt/mcp host/bin/host",
                "{client:?}: {text}"
            );
            let args: Vec<&str> = server["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(args[..2], ["serve", "--stdio"], "{client:?}");
            assert_eq!(
                args.contains(&"--underscore-names"),
                client.needs_underscores()
            );
            assert_eq!(args[args.len() - 2..], ["--plugins", "/p"]);
            assert_eq!(server["env"]["GODOT_DOC_DIR"], "/docs/4.x:/docs/3.x");
        }
    }
}
