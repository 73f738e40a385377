//! The `server` scenario: durable writes, reads and watch delivery of the embedded API server.
//!
//! Baselines, measured in the same run on the same disk:
//! - writes: one redb commit per 1 KiB value with immediate durability, in a loop (what a store
//!   without group commit can acknowledge);
//! - reads: a bare axum route answering the same bytes from memory over the same client;
//! - watch delivery: the writer's own acknowledgement latency for the same writes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::client::Conn;

struct Params {
    writers: usize,
    objects_per_writer: usize,
    readers: usize,
    reads_per_reader: usize,
    watchers: Vec<usize>,
    watch_events: usize,
}

impl Params {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                writers: 4,
                objects_per_writer: 100,
                readers: 4,
                reads_per_reader: 500,
                watchers: vec![1, 10],
                watch_events: 50,
            }
        } else {
            Self {
                writers: 16,
                objects_per_writer: 500,
                readers: 16,
                reads_per_reader: 5_000,
                watchers: vec![1, 10, 100],
                watch_events: 200,
            }
        }
    }
}

/// The `p` quantile of sorted latencies, in milliseconds.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// `x` rounded to two decimals, for the results files.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn payload() -> String {
    "x".repeat(1024)
}

/// Runs `workers` tasks, each doing `per_worker` requests built by `make`, and returns
/// (requests per second, sorted latencies, failures).
async fn hammer<F>(
    addr: SocketAddr,
    workers: usize,
    per_worker: usize,
    make: F,
) -> Result<(f64, Vec<Duration>, usize), String>
where
    F: Fn(usize, usize) -> (Method, String, Bytes, &'static str, StatusCode)
        + Send
        + Sync
        + 'static,
{
    let make = Arc::new(make);
    let mut conns = Vec::new();
    for _ in 0..workers {
        conns.push(Conn::open(addr).await?);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (w, mut conn) in conns.into_iter().enumerate() {
        let make = make.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_worker);
            let mut failures = 0usize;
            for i in 0..per_worker {
                let (method, path, body, ct, want) = make(w, i);
                let t0 = Instant::now();
                match conn.send(method, &path, ct, body).await {
                    Ok((status, _)) if status == want => lat.push(t0.elapsed()),
                    Ok(_) | Err(_) => failures += 1,
                }
            }
            (lat, failures)
        }));
    }
    let mut all = Vec::new();
    let mut failures = 0;
    for t in tasks {
        let (lat, f) = t.await.map_err(|e| e.to_string())?;
        all.extend(lat);
        failures += f;
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort();
    Ok((
        (workers * per_worker - failures) as f64 / secs,
        all,
        failures,
    ))
}

fn redb_floor(dir: &std::path::Path, n: usize) -> Result<f64, String> {
    const T: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("t");
    let db = redb::Database::create(dir.join("floor.redb")).map_err(|e| e.to_string())?;
    let value = vec![b'x'; 1024 + 400];
    let start = Instant::now();
    for i in 0..n {
        let w = db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut t = w.open_table(T).map_err(|e| e.to_string())?;
            t.insert(format!("key-{i}").as_str(), value.as_slice())
                .map_err(|e| e.to_string())?;
        }
        w.commit().map_err(|e| e.to_string())?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn bare_server(body: Bytes) -> Result<SocketAddr, String> {
    let app = axum::Router::new().route(
        "/obj",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// Watch delivery latency with `watchers` open watches: (delivery p50/p99 ms, ack p50/p99 ms, lost).
// Long on purpose: a scenario reads top to bottom as the steps it measures and reports.
async fn watch_latency(
    addr: SocketAddr,
    watchers: usize,
    events: usize,
    round: usize,
) -> Result<(f64, f64, f64, f64, usize), String> {
    let ns = format!("watch-{round}");
    let mut setup = Conn::open(addr).await?;
    let (s, _) = setup
        .send(
            Method::POST,
            "/api/v1/namespaces",
            "application/json",
            Bytes::from(json!({"metadata": {"name": ns}}).to_string()),
        )
        .await?;
    if s != StatusCode::CREATED {
        return Err(format!("creating namespace {ns} answered {s}"));
    }
    let (_, list) = setup
        .send(
            Method::GET,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            "application/json",
            Bytes::new(),
        )
        .await?;
    let rv = serde_json::from_slice::<Value>(&list)
        .ok()
        .and_then(|v| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .ok_or("list without resourceVersion")?;
    let sent: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; events]));
    let mut readers = Vec::new();
    for _ in 0..watchers {
        let conn = Conn::open(addr).await?;
        let mut body = conn
            .stream(&format!(
                "/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}"
            ))
            .await?;
        let sent = sent.clone();
        readers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut buf = Vec::new();
            let mut seen = 0usize;
            while seen < events {
                let Ok(Some(Ok(frame))) =
                    tokio::time::timeout(Duration::from_secs(30), body.frame()).await
                else {
                    break;
                };
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let now = Instant::now();
                buf.extend_from_slice(&data);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                        continue;
                    };
                    let name = ev
                        .pointer("/object/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if let Some(i) = name
                        .strip_prefix("w-")
                        .and_then(|n| n.parse::<usize>().ok())
                    {
                        if let Some(Some(t0)) = sent.lock().await.get(i).copied() {
                            lat.push(now - t0);
                        }
                        seen += 1;
                    }
                }
            }
            (lat, events - seen)
        }));
    }
    let mut writer = Conn::open(addr).await?;
    let mut acks = Vec::new();
    let data = payload();
    for i in 0..events {
        let body = Bytes::from(
            json!({"metadata": {"name": format!("w-{i}")}, "data": {"v": data}}).to_string(),
        );
        let t0 = Instant::now();
        sent.lock().await[i] = Some(t0);
        let (s, _) = writer
            .send(
                Method::POST,
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                "application/json",
                body,
            )
            .await?;
        if s != StatusCode::CREATED {
            return Err(format!("watch write answered {s}"));
        }
        acks.push(t0.elapsed());
    }
    let mut lat = Vec::new();
    let mut lost = 0;
    for r in readers {
        let (l, missing) = r.await.map_err(|e| e.to_string())?;
        lat.extend(l);
        lost += missing;
    }
    lat.sort();
    acks.sort();
    Ok((
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        percentile(&acks, 0.5),
        percentile(&acks, 0.99),
        lost,
    ))
}

/// One row of the results table; the ratio is greater than 1 when backflow is better.
pub(crate) fn row(
    figure: &str,
    backflow: f64,
    baseline: f64,
    higher_is_better: bool,
    baseline_is: &str,
) -> Value {
    let ratio = if higher_is_better {
        backflow / baseline
    } else {
        baseline / backflow
    };
    json!({"figure": figure, "backflow": round2(backflow), "baseline": round2(baseline), "ratio": round2(ratio), "baseline_is": baseline_is})
}

/// Runs the scenario and returns its result object.
// Long on purpose: a scenario reads top to bottom as the steps it measures and reports.
pub async fn run(quick: bool) -> Result<Value, String> {
    let p = Params::new(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = backflow_server::ServerConfig::new(tmp.path().join("data"));
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = backflow_server::start(config)
        .await
        .map_err(|e| e.to_string())?;
    let addr = server.addr;
    let data = payload();

    let creates = p.writers * p.objects_per_writer;
    let floor = {
        let dir = tmp.path().to_path_buf();
        let n = creates.min(2_000);
        tokio::task::spawn_blocking(move || redb_floor(&dir, n))
            .await
            .map_err(|e| e.to_string())??
    };

    let d = data.clone();
    let (create_rate, create_lat, create_fail) = hammer(addr, p.writers, p.objects_per_writer, move |w, i| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{w}-{i}")}, "data": {"v": d}});
        (Method::POST, "/api/v1/namespaces/default/configmaps".into(), Bytes::from(body.to_string()), "application/json", StatusCode::CREATED)
    })
    .await?;

    let (update_rate, update_lat, update_fail) =
        hammer(addr, p.writers, p.objects_per_writer, move |w, i| {
            let body = json!({"data": {"v": format!("{}-{i}", "y".repeat(1000))}});
            (
                Method::PATCH,
                format!("/api/v1/namespaces/default/configmaps/cm-{w}-{i}"),
                Bytes::from(body.to_string()),
                "application/merge-patch+json",
                StatusCode::OK,
            )
        })
        .await?;

    let objects = p.objects_per_writer;
    let writers = p.writers;
    let (get_rate, get_lat, get_fail) = hammer(addr, p.readers, p.reads_per_reader, move |w, i| {
        let path = format!(
            "/api/v1/namespaces/default/configmaps/cm-{}-{}",
            (w + i) % writers,
            (i * 7919) % objects
        );
        (
            Method::GET,
            path,
            Bytes::new(),
            "application/json",
            StatusCode::OK,
        )
    })
    .await?;

    let sample = {
        let mut c = Conn::open(addr).await?;
        c.send(
            Method::GET,
            "/api/v1/namespaces/default/configmaps/cm-0-0",
            "application/json",
            Bytes::new(),
        )
        .await?
        .1
    };
    let bare = bare_server(sample.clone()).await?;
    let (bare_rate, bare_lat, _) = hammer(bare, p.readers, p.reads_per_reader, |_, _| {
        (
            Method::GET,
            "/obj".into(),
            Bytes::new(),
            "application/json",
            StatusCode::OK,
        )
    })
    .await?;

    let mut rows = vec![
        row(
            "durable creates/s",
            create_rate,
            floor,
            true,
            "redb: one durable commit per write, single writer",
        ),
        row(
            "durable updates/s (merge patch)",
            update_rate,
            floor,
            true,
            "redb: one durable commit per write, single writer",
        ),
        row(
            "create p50 ms",
            percentile(&create_lat, 0.5),
            1000.0 / floor,
            false,
            "one redb durable commit",
        ),
        row(
            "create p99 ms",
            percentile(&create_lat, 0.99),
            1000.0 / floor,
            false,
            "one redb durable commit",
        ),
        row(
            "update p99 ms",
            percentile(&update_lat, 0.99),
            1000.0 / floor,
            false,
            "one redb durable commit",
        ),
        row(
            "GETs/s",
            get_rate,
            bare_rate,
            true,
            "bare axum route answering the same bytes",
        ),
        row(
            "GET p50 ms",
            percentile(&get_lat, 0.5),
            percentile(&bare_lat, 0.5),
            false,
            "bare axum route",
        ),
        row(
            "GET p99 ms",
            percentile(&get_lat, 0.99),
            percentile(&bare_lat, 0.99),
            false,
            "bare axum route",
        ),
    ];
    let mut watch_results = Vec::new();
    for (round, &n) in p.watchers.iter().enumerate() {
        let (d50, d99, a50, a99, lost) = watch_latency(addr, n, p.watch_events, round).await?;
        rows.push(row(
            &format!("watch delivery p50 ms, {n} watchers"),
            d50,
            a50,
            false,
            "the writer's own ack latency (p50)",
        ));
        rows.push(row(
            &format!("watch delivery p99 ms, {n} watchers"),
            d99,
            a99,
            false,
            "the writer's own ack latency (p99)",
        ));
        watch_results.push(json!({"watchers": n, "delivery_p50_ms": round2(d50), "delivery_p99_ms": round2(d99), "ack_p50_ms": round2(a50), "ack_p99_ms": round2(a99), "events_missed": lost}));
    }
    server.shutdown().await;

    let mut notes = vec![
        json!(format!(
            "Aim ≥ 2,000 acknowledged durable writes/s: creates {:.0}/s, updates {:.0}/s with {} concurrent writers.",
            create_rate, update_rate, p.writers
        )),
        json!(format!(
            "Aim ≥ 20,000 GETs/s: {:.0}/s with {} concurrent readers (client and server share the machine's cores).",
            get_rate, p.readers
        )),
        json!(format!(
            "Failures: creates {create_fail}, updates {update_fail}, GETs {get_fail}."
        )),
    ];
    if create_rate < 2_000.0 {
        notes.push(json!("Writes fall short of the aim: each group commit is one fsync, so the rate is bounded by fsync latency × batch size; more concurrent writers make bigger batches."));
    }
    if get_rate < 20_000.0 {
        notes.push(json!("GETs fall short of the aim: with 2 cores the load generator takes one of them; the bare-route baseline shows the HTTP floor on this machine."));
    }
    Ok(json!({
        "scenario": "server",
        "parameters": {"writers": p.writers, "objects_per_writer": p.objects_per_writer, "readers": p.readers,
                        "reads_per_reader": p.reads_per_reader, "watchers": p.watchers, "watch_events": p.watch_events,
                        "value_bytes": 1024, "quick": quick},
        "backflow": {"creates_per_s": round2(create_rate), "updates_per_s": round2(update_rate), "gets_per_s": round2(get_rate),
                      "create_p50_ms": round2(percentile(&create_lat, 0.5)), "create_p99_ms": round2(percentile(&create_lat, 0.99)),
                      "get_p50_ms": round2(percentile(&get_lat, 0.5)), "get_p99_ms": round2(percentile(&get_lat, 0.99)),
                      "failures": create_fail + update_fail + get_fail, "watch": watch_results},
        "baseline": {"redb_durable_commits_per_s": round2(floor), "bare_http_gets_per_s": round2(bare_rate)},
        "ratio": {"creates": round2(create_rate / floor), "updates": round2(update_rate / floor), "gets": round2(get_rate / bare_rate)},
        "rows": rows,
        "notes": notes,
    }))
}
