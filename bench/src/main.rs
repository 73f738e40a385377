//! backflow's benchmarks: each scenario measures backflow and a baseline in the same run and
//! reports the ratio (greater than 1 when backflow is better).
//!
//! `cargo run --release -p backflow-bench -- SCENARIO [--quick]`, or `all`. Each scenario prints
//! its result as one JSON object on the last line of stdout and merges it into
//! `bench/results.json` and `bench/RESULTS.md`; a `--quick` run only prints it.

mod bigfile;
mod bulk_apply;
mod client;
mod cpu;
mod foreign;
mod git;
mod hook;
mod latency;
mod layout;
mod live;
mod notice;
mod replay;
mod report;
mod rest;
mod scale;
mod server;
mod snapshot;

/// The allocator `backflow` itself runs with, so the embedded server measures the same.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

const SCENARIOS: &[&str] = &[
    "server",
    "git",
    "rest-writes",
    "mirror-latency",
    "snapshot",
    "store-scale",
    "push-notice",
    "foreign-push",
    "replay-race",
    "big-file",
    "big-folder",
];

/// The child process of the `snapshot` scenario: `snapshot-child N DIR LAYOUT`.
fn snapshot_child(rt: &tokio::runtime::Runtime, args: &[String]) -> ExitCode {
    let (Some(n), Some(dir), Some(layout)) = (
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
        args.get(2),
        args.get(3).and_then(|l| layout::Layout::parse(l)),
    ) else {
        eprintln!("usage: backflow-bench snapshot-child N DIR folder|spread");
        return ExitCode::from(2);
    };
    match rt.block_on(snapshot::child(n, std::path::Path::new(dir), layout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: snapshot child: {e}");
            ExitCode::from(1)
        }
    }
}

/// The child process of the `store-scale` scenario: `store-scale-child N DIR`.
fn scale_child(rt: &tokio::runtime::Runtime, args: &[String]) -> ExitCode {
    let (Some(n), Some(dir)) = (
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
        args.get(2),
    ) else {
        eprintln!("usage: backflow-bench store-scale-child N DIR");
        return ExitCode::from(2);
    };
    match rt.block_on(scale::child(n, std::path::Path::new(dir))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: store-scale child: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs every scenario, each in a process of its own: what one leaves behind (tasks of a
/// server it stopped, memory it freed late, files it deleted) must not weigh on the next one's
/// figures. Each child records its own results; the total time is printed at the end.
fn run_all(quick: bool) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: cannot find this program to run the scenarios: {e}");
            return ExitCode::from(1);
        }
    };
    let t0 = std::time::Instant::now();
    for name in SCENARIOS {
        let mut child = std::process::Command::new(&exe);
        child.arg(name).env("BACKFLOW_BENCH_COMMAND", "all");
        if quick {
            child.arg("--quick");
        }
        match child.status() {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("error: scenario {name} failed ({status})");
                return ExitCode::from(1);
            }
            Err(e) => {
                eprintln!("error: cannot run scenario {name}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    eprintln!(
        "all {} scenarios in {:.0} s",
        SCENARIOS.len(),
        t0.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

fn usage() -> String {
    format!(
        "usage: backflow-bench SCENARIO [--quick]\n  SCENARIO: all | {}\n  --quick   small sizes, finishes in under a minute (smoke check)",
        SCENARIOS.join(" | ")
    )
}

fn main() -> ExitCode {
    // `BACKFLOW_BENCH_LOG=<filter>` shows what backflow does during a run (on standard error).
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("BACKFLOW_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let Some(scenario) = args.iter().find(|a| !a.starts_with("--")).cloned() else {
        eprintln!("{}", usage());
        return ExitCode::from(2);
    };
    if scenario == "all" {
        return run_all(quick);
    }
    if scenario != "snapshot-child"
        && scenario != "store-scale-child"
        && !SCENARIOS.contains(&scenario.as_str())
    {
        eprintln!("error: unknown scenario {scenario:?}\n{}", usage());
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match scenario.as_str() {
        "snapshot-child" => snapshot_child(&rt, &args),
        "store-scale-child" => scale_child(&rt, &args),
        name => run_one(&rt, name, quick, &args),
    }
}

/// Runs scenario `name`, prints its result and (unless `quick`) records it.
fn run_one(rt: &tokio::runtime::Runtime, name: &str, quick: bool, args: &[String]) -> ExitCode {
    let result = match name {
        "server" => rt.block_on(server::run(quick)),
        "git" => rt.block_on(git::run(quick)),
        "rest-writes" => rt.block_on(rest::run(quick)),
        "mirror-latency" => rt.block_on(latency::run(quick)),
        "snapshot" => rt.block_on(snapshot::run(quick)),
        "store-scale" => rt.block_on(scale::run(quick)),
        "push-notice" => rt.block_on(notice::run(quick)),
        "foreign-push" => rt.block_on(foreign::run(quick)),
        "replay-race" => rt.block_on(replay::run(quick)),
        "big-file" => rt.block_on(bigfile::run(quick)),
        "big-folder" => rt.block_on(bigfile::run_folder(quick)),
        _ => Err(format!("scenario {name} is not built yet")),
    };
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: scenario {name} failed: {e}");
            return ExitCode::from(1);
        }
    };
    // A smoke run's figures are not results: they never replace a full run's.
    if quick {
        eprintln!("note: a --quick run leaves bench/RESULTS.md and results.json as they are");
    } else if let Err(e) = report::record(&r, &command(args)) {
        eprintln!("warning: cannot write the results files: {e}");
    }
    println!("{r}");
    ExitCode::SUCCESS
}

/// The command that made a scenario's figures: `all` when `all` ran it.
fn command(args: &[String]) -> String {
    let asked: Vec<String> = match std::env::var("BACKFLOW_BENCH_COMMAND") {
        Ok(all) if all == "all" => std::iter::once(all)
            .chain(args.iter().filter(|a| a.starts_with("--")).cloned())
            .collect(),
        _ => args.to_vec(),
    };
    std::iter::once("cargo run --release -p backflow-bench --".to_string())
        .chain(asked)
        .collect::<Vec<_>>()
        .join(" ")
}
