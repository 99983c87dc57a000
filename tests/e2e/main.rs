//! End-to-end tests: the real `host serve` binary (stdio, and HTTP in http.rs), real plugins
//! built for wasm32-wasip2, real test runners, spoken to over MCP by rmcp's
//! client. Build the plugins first: scripts/build-plugins (scripts/test
//! does both).

mod asking;
mod bundle;
mod clients;
mod cofer;
mod cofer_cli;
mod cofer_cli_answers;
mod cofer_devcontainer;
mod cofer_engines;
mod cofer_escape;
mod cofer_files;
mod cofer_parity;
mod cofer_secret_forms;
mod cofer_secrets;
mod cofer_ssh;
mod confined;
mod content;
mod copilot;
mod filters;
mod git_files;
mod godot;
mod godot_meaning;
mod harness;
mod host_core;
mod http;
mod isolated_engine;
mod languages;
mod layout;
mod lifetime;
mod mock_llm;
mod pi;
mod pipes;
mod planted;
mod pty;
mod registry;
mod registry_login;
mod registry_update;
mod run_test;
mod run_test_coverage;
mod run_test_errors;
mod run_test_expected;
mod run_test_flaky;
mod run_test_related;
mod run_test_slowest;
mod secrets;
mod ssh_engine;
mod tasks;
mod views;
mod windows;
mod wine;
