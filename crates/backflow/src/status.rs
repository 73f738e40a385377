//! `backflow status`: every target, branch and claim the API holds, read through a kubeconfig,
//! with what needs a person (conditions that are not fine, an apply that failed or is
//! unresolved, a held prune, refused changes, unreadable files, plaintext secrets) — and an
//! exit code a script can act on: 0 all fine, 1 something needs a person, 2 the API could not
//! be read.

use std::process::ExitCode;

use backflow_face::StatusReport;
use clap::Args;

use crate::connect::ClientArgs;
use crate::output;

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    api: ClientArgs,
    /// Only this namespace (all namespaces by default).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// `text` (a table per kind, then what needs a person) or `json`.
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
}

/// Runs the verb.
pub(crate) fn run(args: &StatusArgs) -> ExitCode {
    let runtime = match crate::connect::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let read = async {
        let client = args.api.client().await?;
        StatusReport::read(&client, args.namespace.as_deref()).await
    };
    let report = match runtime.block_on(read) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = if args.output == "json" {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => format!("{json}\n"),
            Err(e) => {
                eprintln!("error: cannot render the report: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        report.render()
    };
    let printed = output::print_out(&text);
    if printed != ExitCode::SUCCESS {
        return printed;
    }
    if report.needs_a_person() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
