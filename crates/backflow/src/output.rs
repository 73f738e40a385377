//! What the command writes for people and programs: its output on stdout (a reader that closed
//! the pipe early, as `| head` does, ends the command quietly) and its log on stderr (plain
//! text unless a terminal shows it in colour, or JSON for a log collector).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// Human-readable lines; colour only when stderr is a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// `text` or `json`.
pub(crate) fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    match text {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("{other:?}: expected text or json")),
    }
}

/// Logs to stderr in `format`, at the level `BACKFLOW_LOG` asks for (`info` by default).
pub(crate) fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BACKFLOW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Writes `text` to stdout. A closed pipe (`backflow crds | head`) is no error: the reader has
/// what it wanted.
pub(crate) fn print_out(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            ExitCode::from(1)
        }
    }
}

/// The configuration kinds' CRDs as `format` (`json`: one List; `yaml`: one document each, in
/// canonical YAML).
pub(crate) fn crds(format: &str) -> Result<String, serde_json::Error> {
    let crds = backflow_api::config::crds();
    if format == "yaml" {
        let documents: Vec<String> = crds.iter().map(backflow_manifest::render).collect();
        return Ok(format!("---\n{}", documents.join("---\n")));
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds});
    serde_json::to_string_pretty(&list).map(|s| format!("{s}\n"))
}
