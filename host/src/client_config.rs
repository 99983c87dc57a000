//! `host client-config CLIENT`: the snippet that adds this host to an MCP
//! client, in that client's own format (JSON or TOML, `mcpServers` or
//! `servers` or `mcp_servers`), on stdout; where it goes, on stderr. The
//! client either starts the host (stdio) or connects to one serving HTTP
//! (`--url`), sending a bearer token it reads from an environment variable
//! (VS Code: a password prompt) so the token is never in the file.
//!
//! Clients whose model API refuses dots in tool names (`^[a-zA-Z0-9_-]+$`:
//! Claude Code, Codex, Copilot CLI; Cursor to be safe) get
//! `--underscore-names`; VS Code maps names itself and Gemini CLI takes
//! dots.

use std::collections::BTreeMap;

use clap::ValueEnum;
use serde_json::json;

/// The answer, in tokens, Codex is told to pass its model whole: the
/// 20 KB this host's tools keep their default answers within.
const OUTPUT_TOKENS: i64 = 8_000;

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

/// How a client reaches the host.
pub enum Connection {
    /// The client starts it.
    Stdio {
        command: String,
        /// After `serve --stdio` (and `--underscore-names` where needed).
        extra_args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// The client connects to a host serving Streamable HTTP.
    Http {
        url: String,
        /// The variable holding the bearer token, if the host wants one.
        token_env: Option<String>,
    },
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

    /// The client's own list of tools it runs without asking, for the
    /// tools `exposed` of the server `name`, and where it goes; `Err` says
    /// why there is none for this client.
    pub fn allow_list(
        self,
        name: &str,
        exposed: &[String],
    ) -> Result<(String, &'static str), String> {
        match self {
            // Headless `claude -p` refuses every MCP call not allowed here
            // (or by `--allowedTools`), read-only ones too.
            Client::ClaudeCode => {
                let allow: Vec<String> = exposed
                    .iter()
                    .map(|tool| format!("mcp__{name}__{tool}"))
                    .collect();
                let root = json!({"permissions": {"allow": allow}});
                Ok((
                    serde_json::to_string_pretty(&root).expect("JSON serialises") + "\n",
                    "merge it into ~/.claude/settings.json (a project's .claude/settings.json is ignored by headless `claude -p` until the workspace was trusted in an interactive session)",
                ))
            }
            // Headless `gemini -p` offers the model no MCP tool that is
            // neither allowed here nor on a trusted server; it names them
            // `mcp_<server>_<tool>`, other characters made `_`.
            Client::Gemini => {
                let allowed: Vec<String> = exposed
                    .iter()
                    .map(|tool| {
                        format!("mcp_{name}_{tool}")
                            .chars()
                            .map(|c| {
                                if c.is_ascii_alphanumeric() || "_-.:".contains(c) {
                                    c
                                } else {
                                    '_'
                                }
                            })
                            .collect()
                    })
                    .collect();
                let root = json!({"tools": {"allowed": allowed}});
                Ok((
                    serde_json::to_string_pretty(&root).expect("JSON serialises") + "\n",
                    "merge it into ~/.gemini/settings.json",
                ))
            }
            _ => Err(format!(
                "--allow-read-only writes the allow-lists of Claude Code (permissions.allow) and \
                 Gemini CLI (tools.allowed); {} has none this host writes: see \
                 docs/src/clients.md for what it asks before a call",
                self.to_possible_value()
                    .map_or("this client".into(), |v| v.get_name().to_string())
            )),
        }
    }

    /// The snippet naming the host `name`.
    pub fn snippet(self, name: &str, connection: &Connection) -> String {
        let server = match connection {
            Connection::Stdio {
                command,
                extra_args,
                env,
            } => self.stdio_server(command, extra_args, env),
            Connection::Http { url, token_env } => {
                self.http_server(url, token_env.as_deref(), name)
            }
        };
        if self == Client::Codex {
            let mut server: toml::Table =
                serde_json::from_value(server).expect("a JSON object is a TOML table");
            // Long test runs and agent prompts outlast Codex's 60 s.
            server.insert("tool_timeout_sec".into(), 3600.into());
            let mut servers = toml::Table::new();
            servers.insert(name.into(), server.into());
            let mut root = toml::Table::new();
            // Codex 0.171 cuts every tool's answer to about 12 KB (keeping
            // its start and end); ours are made to fit 20 KB.
            root.insert("tool_output_token_limit".into(), OUTPUT_TOKENS.into());
            root.insert("mcp_servers".into(), servers.into());
            return toml::to_string(&root).expect("a table serialises");
        }
        let key = match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        };
        let mut root = serde_json::Map::new();
        root.insert(key.to_string(), json!({ name: server }));
        if let (
            Client::Vscode,
            Connection::Http {
                token_env: Some(_), ..
            },
        ) = (self, connection)
        {
            root.insert(
                "inputs".into(),
                json!([{"type": "promptString", "id": format!("{name}-token"), "password": true,
                        "description": format!("Bearer token of the MCP server {name}")}]),
            );
        }
        serde_json::to_string_pretty(&root).expect("JSON serialises") + "\n"
    }

    fn stdio_server(
        self,
        command: &str,
        extra_args: &[String],
        env: &BTreeMap<String, String>,
    ) -> serde_json::Value {
        let mut args = vec!["serve".to_string(), "--stdio".to_string()];
        if self.needs_underscores() {
            args.push("--underscore-names".into());
        }
        args.extend(extra_args.iter().cloned());
        let mut server = json!({"command": command, "args": args});
        if !env.is_empty() || self != Client::Codex {
            server["env"] = json!(env);
        }
        match self {
            Client::ClaudeCode | Client::Vscode => server["type"] = json!("stdio"),
            Client::Copilot => {
                server["type"] = json!("local");
                server["tools"] = json!(["*"]);
            }
            Client::Codex | Client::Cursor | Client::Gemini => {}
        }
        server
    }

    fn http_server(self, url: &str, token_env: Option<&str>, name: &str) -> serde_json::Value {
        let mut server = match self {
            Client::ClaudeCode | Client::Vscode => json!({"type": "http", "url": url}),
            Client::Copilot => json!({"type": "http", "url": url, "tools": ["*"]}),
            Client::Codex | Client::Cursor => json!({"url": url}),
            Client::Gemini => json!({"httpUrl": url}),
        };
        let Some(var) = token_env else {
            return server;
        };
        // Each client's own way of naming a secret it reads at start.
        let token = match self {
            Client::Codex => {
                server["bearer_token_env_var"] = json!(var);
                return server;
            }
            Client::Vscode => format!("${{input:{name}-token}}"),
            Client::Cursor => format!("${{env:{var}}}"),
            Client::ClaudeCode | Client::Copilot | Client::Gemini => format!("${{{var}}}"),
        };
        server["headers"] = json!({"Authorization": format!("Bearer {token}")});
        server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Connection {
        Connection::Stdio {
            command: "/opt/mcp host/bin/host".into(),
            extra_args: vec!["--plugins".into(), "/p".into()],
            env: BTreeMap::from([(
                "GODOT_DOC_DIR".to_string(),
                "/docs/4.x:/docs/3.x".to_string(),
            )]),
        }
    }

    /// The whole snippet, parsed as the client would, as JSON.
    fn parsed(client: Client, text: &str) -> serde_json::Value {
        if client == Client::Codex {
            let table: toml::Table = toml::from_str(text).unwrap();
            serde_json::to_value(&table).unwrap()
        } else {
            serde_json::from_str(text).unwrap()
        }
    }

    fn server(client: Client, text: &str) -> serde_json::Value {
        let key = match client {
            Client::Codex => "mcp_servers",
            Client::Vscode => "servers",
            _ => "mcpServers",
        };
        parsed(client, text)[key]["wasm-host"].clone()
    }

    #[test]
    fn claude_code_gets_an_allow_list_of_the_tools_named_as_it_calls_them() {
        let tools = ["godot_search".to_string(), "godot_get_class".to_string()];
        let (text, place) = Client::ClaudeCode.allow_list("wasm-host", &tools).unwrap();
        let root: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            root["permissions"]["allow"],
            json!([
                "mcp__wasm-host__godot_search",
                "mcp__wasm-host__godot_get_class"
            ])
        );
        assert!(place.contains(".claude/settings.json"), "{place}");
        let (text, _) = Client::Gemini
            .allow_list("wasm host", &["godot.search".to_string()])
            .unwrap();
        let root: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            root["tools"]["allowed"],
            json!(["mcp_wasm_host_godot.search"])
        );
        let refused = Client::Codex.allow_list("wasm-host", &tools).unwrap_err();
        assert!(refused.contains("codex"), "{refused}");
    }

    #[test]
    fn every_client_gets_its_own_format() {
        for client in Client::value_variants() {
            let text = client.snippet("wasm-host", &launch());
            let server = server(*client, &text);
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

    #[test]
    fn an_http_server_is_named_by_url_and_its_token_by_a_variable() {
        let url = "http://127.0.0.1:8931/mcp";
        for client in Client::value_variants() {
            let connection = Connection::Http {
                url: url.into(),
                token_env: Some("WASM_HOST_TOKEN".into()),
            };
            let text = client.snippet("wasm-host", &connection);
            let server = server(*client, &text);
            let url_key = if *client == Client::Gemini {
                "httpUrl"
            } else {
                "url"
            };
            assert_eq!(server[url_key], url, "{client:?}: {text}");
            assert!(server.get("command").is_none(), "{client:?}: {text}");
            let auth = server["headers"]["Authorization"].as_str();
            match client {
                Client::Codex => assert_eq!(server["bearer_token_env_var"], "WASM_HOST_TOKEN"),
                Client::Vscode => {
                    assert_eq!(auth, Some("Bearer ${input:wasm-host-token}"));
                    let inputs = &parsed(*client, &text)["inputs"];
                    assert_eq!(inputs[0]["id"], "wasm-host-token", "{text}");
                    assert_eq!(inputs[0]["password"], true);
                }
                Client::Cursor => assert_eq!(auth, Some("Bearer ${env:WASM_HOST_TOKEN}")),
                _ => assert_eq!(auth, Some("Bearer ${WASM_HOST_TOKEN}"), "{client:?}"),
            }
            // Without a token, no header and no prompt.
            let open = Connection::Http {
                url: url.into(),
                token_env: None,
            };
            let text = client.snippet("wasm-host", &open);
            assert!(
                !text.contains("Authorization") && !text.contains("inputs"),
                "{text}"
            );
        }
    }
}
