//! The `replay-race` scenario: what the three-way replay costs when somebody else pushes while
//! backflow publishes.
//!
//! 1. Mirror latency with a race: one writer, commit window `0s`, writes sent with
//!    `X-Backflow-Wait: pushed` (as `mirror-latency`); before every tenth write a person's commit
//!    lands straight in the remote, annotating the very file that write changes, so backflow's
//!    push is refused (or its pre-publish read finds the new tip) and the write is replayed onto
//!    the person's commit with the field-level merge. Baselines stepped write by write in the same
//!    run: the in-place floor and the git2 push loop of `mirror-latency`. After every answer the
//!    remote's tip must be the commit the answer names, and a raced write's file must hold both
//!    the write's token and the person's annotation.
//! 2. A bulk replay: 1,000 writes pending in a commit window while a person's commit changes all
//!    1,000 of their files; the last write asks to wait for the push, and the time runs from it
//!    until its answer (the commit, the refused push or pre-publish read, the replay of all 1,000
//!    onto the person's commit, the push). Baseline in the same run: the same 1,000 writes
//!    published without a race.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use git2::{Oid, Repository, Signature};
use serde_json::{Value, json};

use crate::client::Conn;
use crate::git::BRANCH;
use crate::latency::Baselines;
use crate::live::{
    self, COMMIT, CONFIGMAPS, Live, PushedWrite, WAIT, configmap_write, configmap_yaml,
    pushed_write,
};
use crate::server::{percentile, round2, row};

/// Objects written in rotation by the latency half.
const OBJECTS: usize = 100;
/// Every how many writes a person's commit races one.
const RACE_EVERY: usize = 10;
/// Writes (and files of the person's commit) of the bulk replay.
const BULK: usize = 1000;

fn writes(quick: bool) -> usize {
    if quick { 200 } else { 500 }
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = writes(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let race = {
        let mut live = Live::start(&tmp.path().join("latency")).await?;
        start_coordinated(&mut live, "0s").await?;
        live.wait_mirroring().await?;
        let mut baselines = Baselines::new(tmp.path())?;
        // The same writes first without a race: what the claim acting beside the mirror costs
        // on its own.
        let unraced = raced_writes(&live, &mut baselines, 0..n, false).await;
        let race = match unraced {
            Ok(unraced) => raced_writes(&live, &mut baselines, n..2 * n, true)
                .await
                .map(|r| (unraced, r)),
            Err(e) => Err(e),
        };
        live.stop().await;
        (race?, baselines)
    };
    let bulk = {
        let mut live = Live::start(&tmp.path().join("bulk")).await?;
        start_coordinated(&mut live, "30s").await?;
        live.wait_mirroring().await?;
        let bulk = bulk_replay(&live).await;
        live.stop().await;
        bulk?
    };
    let ((unraced, raced), baselines) = race;
    Ok(report(n, quick, &unraced, &raced, &baselines, &bulk))
}

/// Starts the mirror with `commit_window` and the default claim acting (`serve --apply`): the
/// three-way rule holds where a claim coordinates the folder (elsewhere the live side is the
/// truth and objects are written whole). No push notices: a person's commit is found by the
/// refused push or the read before publishing.
async fn start_coordinated(live: &mut Live, commit_window: &str) -> Result<(), String> {
    live.start_mirror_with(commit_window, Duration::from_secs(3600), None, true)
        .await
}

/// What the raced latency half measured.
#[derive(Default)]
struct Raced {
    /// Send → answer, every write.
    all: Vec<Duration>,
    /// The same, of the writes a person's commit raced.
    replayed: Vec<Duration>,
    failures: usize,
    /// Answers whose commit was not the remote's tip.
    tip_mismatch: usize,
    /// Raced writes whose file lacked the token or the person's annotation.
    lost: usize,
}

/// `n` writes over `OBJECTS` objects, a person's commit before every tenth, each stepped beside
/// the baselines.
async fn raced_writes(
    live: &Live,
    baselines: &mut Baselines,
    writes: std::ops::Range<usize>,
    race: bool,
) -> Result<Raced, String> {
    let remote = Repository::open_bare(&live.remote).map_err(|e| e.to_string())?;
    let mut conn = Conn::open(live.addr()).await?;
    let mut out = Raced::default();
    for i in writes {
        let name = format!("race-{}", i % OBJECTS);
        let token = format!("t{i:06}");
        let path = format!("{CONFIGMAPS}/{name}.yaml");
        baselines.step(&path, configmap_yaml(&name, &token).as_bytes());
        let create = i < OBJECTS;
        let racing = race && !create && i % RACE_EVERY == 0;
        let note = format!("p{i:06}");
        if racing {
            tokio::task::block_in_place(|| annotate(&remote, std::slice::from_ref(&path), &note))?;
        }
        let PushedWrite { took, commit, .. } = pushed_write(&mut conn, &name, &token, create).await;
        let Some(commit) = commit else {
            out.failures += 1;
            continue;
        };
        out.all.push(took);
        let tip = tip_of(&remote)?;
        if tip.to_string() != commit {
            out.tip_mismatch += 1;
        }
        if racing {
            out.replayed.push(took);
            let text = file_at(&remote, tip, &path).unwrap_or_default();
            if !text.contains(&format!("token: {token}\n"))
                || !text.contains(&format!("person: {note}\n"))
            {
                out.lost += 1;
            }
        }
    }
    Ok(out)
}

/// The remote's branch.
fn tip_of(repo: &Repository) -> Result<Oid, String> {
    repo.refname_to_id(&format!("refs/heads/{BRANCH}"))
        .map_err(|e| e.to_string())
}

/// The text of `path` at `commit`.
fn file_at(repo: &Repository, commit: Oid, path: &str) -> Option<String> {
    let tree = repo.find_commit(commit).ok()?.tree().ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    String::from_utf8(blob.content().to_vec()).ok()
}

/// `text` with annotation `person: note` (replacing the one it has).
fn with_note(text: &str, note: &str) -> String {
    let line = format!("    person: {note}\n");
    let mut out = String::with_capacity(text.len() + line.len() + 16);
    let mut replaced = false;
    for l in text.split_inclusive('\n') {
        if l.starts_with("    person: ") {
            out.push_str(&line);
            replaced = true;
        } else {
            out.push_str(l);
        }
    }
    if replaced {
        return out;
    }
    out.replace("metadata:\n", &format!("metadata:\n  annotations:\n{line}"))
}

/// A person's commit on the remote's branch annotating every file of `paths` (which must exist
/// there), written straight into the bare repository; moved by compare-and-swap, again on the
/// new tip if backflow pushed meanwhile.
fn annotate(repo: &Repository, paths: &[String], note: &str) -> Result<Oid, String> {
    let branch = format!("refs/heads/{BRANCH}");
    let sig = Signature::now("person", "person@localhost").map_err(|e| e.to_string())?;
    for _ in 0..20 {
        let tip = tip_of(repo)?;
        let parent = repo.find_commit(tip).map_err(|e| e.to_string())?;
        let base = parent.tree().map_err(|e| e.to_string())?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in paths {
            let text = file_at(repo, tip, path).ok_or(format!("{path} is not on the branch"))?;
            let blob = repo
                .blob(with_note(&text, note).as_bytes())
                .map_err(|e| e.to_string())?;
            update.upsert(path.as_str(), blob, git2::FileMode::Blob);
        }
        let tree_id = update
            .create_updated(repo, &base)
            .map_err(|e| e.to_string())?;
        let tree = repo.find_tree(tree_id).map_err(|e| e.to_string())?;
        let commit = repo
            .commit(None, &sig, &sig, "person annotates", &tree, &[&parent])
            .map_err(|e| e.to_string())?;
        if repo
            .reference_matching(&branch, commit, true, tip, "person pushes")
            .is_ok()
        {
            return Ok(commit);
        }
    }
    Err("the branch kept moving under the person's commit".into())
}

/// What the bulk replay measured.
struct BulkReplay {
    /// The last write's send → answer, publishing without a race.
    plain: Duration,
    /// The same, with the person's commit of `BULK` files racing.
    raced: Duration,
    /// Files of the final tip lacking the raced round's token or the person's annotation.
    lost: usize,
    failures: usize,
}

/// Creates `BULK` objects and waits for them in Git, then publishes `BULK` updates twice: once
/// as they are, once with a person's commit changing all their files while they wait.
async fn bulk_replay(live: &Live) -> Result<BulkReplay, String> {
    let remote = Repository::open_bare(&live.remote).map_err(|e| e.to_string())?;
    let mut conn = Conn::open(live.addr()).await?;
    let mut failures = 0;
    let names: Vec<String> = (0..BULK).map(|i| format!("bulk-{i}")).collect();
    failures += round(&mut conn, &names, "c", true).await?.1;
    let (plain, f) = round(&mut conn, &names, "u1", false).await?;
    failures += f;
    let paths: Vec<String> = names
        .iter()
        .map(|n| format!("{CONFIGMAPS}/{n}.yaml"))
        .collect();
    tokio::task::block_in_place(|| annotate(&remote, &paths, "bulk"))?;
    let (raced, f) = round(&mut conn, &names, "u2", false).await?;
    failures += f;
    let tip = tip_of(&remote)?;
    let lost = names
        .iter()
        .zip(&paths)
        .filter(|(name, path)| {
            let text = file_at(&remote, tip, path).unwrap_or_default();
            !text.contains(&format!(
                "token: u2-{name}
"
            )) || !text.contains(
                "person: bulk
",
            )
        })
        .count();
    Ok(BulkReplay {
        plain,
        raced,
        lost,
        failures,
    })
}

/// One write of each of `names` carrying token `{prefix}-{name}`, answered once stored; the
/// last asks to wait for the push, and its send → answer is returned with the failures.
async fn round(
    conn: &mut Conn,
    names: &[String],
    prefix: &str,
    create: bool,
) -> Result<(Duration, usize), String> {
    let mut failures = 0;
    let Some((last, rest)) = names.split_last() else {
        return Ok((Duration::ZERO, 0));
    };
    for name in rest {
        let (method, uri, ct, body, want) =
            configmap_write(name, &format!("{prefix}-{name}"), create);
        match conn
            .send(method, &uri, ct, Bytes::from(body.to_string()))
            .await
        {
            Ok((status, _)) if status == want => {}
            _ => failures += 1,
        }
    }
    let (method, uri, ct, body, want) = configmap_write(last, &format!("{prefix}-{last}"), create);
    let t0 = Instant::now();
    let answer = conn
        .send_with(
            method,
            &uri,
            ct,
            &[(WAIT, "pushed;timeout=120s")],
            Bytes::from(body.to_string()),
        )
        .await;
    let took = t0.elapsed();
    match answer {
        Ok((status, headers, _)) if status == want && headers.get(COMMIT).is_some() => {}
        Ok((status, _, body)) => {
            return Err(format!(
                "the round's last write was answered {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        Err(e) => return Err(e),
    }
    Ok((took, failures))
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "not met" }
}

/// Each run's latencies, sorted.
struct Sorted {
    /// The writes before any race.
    calm: Vec<Duration>,
    /// The writes of the raced run.
    all: Vec<Duration>,
    /// Of those, the raced ones.
    raced: Vec<Duration>,
    /// The in-place floor's.
    floor: Vec<Duration>,
    /// The git2 push loop's.
    minimum: Vec<Duration>,
}

impl Sorted {
    fn of(unraced: &Raced, race: &Raced, baselines: &Baselines) -> Self {
        let sorted = |v: &[Duration]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        Self {
            calm: sorted(&unraced.all),
            all: sorted(&race.all),
            raced: sorted(&race.replayed),
            floor: sorted(&baselines.floor_times),
            minimum: sorted(&baselines.minimum_times),
        }
    }
}

/// The table's rows.
fn rows(sorted: &Sorted, bulk: &BulkReplay) -> Vec<Value> {
    let Sorted {
        calm,
        all,
        raced,
        floor,
        minimum,
    } = sorted;
    let p = percentile;
    let floor_is =
        "git2 commit written into the bare repository, branch moved by compare-and-swap (no race)";
    vec![
        row(
            "write → on remote p50 ms, the claim acting, no race, vs floor",
            p(calm, 0.5),
            p(floor, 0.5),
            false,
            floor_is,
        ),
        row(
            "write → on remote p50 ms, a person's commit racing every 10th write, vs floor",
            p(all, 0.5),
            p(floor, 0.5),
            false,
            floor_is,
        ),
        row(
            "write → on remote p99 ms, a person's commit racing every 10th write, vs floor",
            p(all, 0.99),
            p(floor, 0.99),
            false,
            floor_is,
        ),
        row(
            "write → on remote p50 ms, a person's commit racing every 10th write, vs no race",
            p(all, 0.5),
            p(calm, 0.5),
            false,
            "the same writes in the same process before any race (the claim acting)",
        ),
        row(
            "raced writes only (replayed onto the person's commit), p50 ms, vs floor",
            p(raced, 0.5),
            p(floor, 0.5),
            false,
            floor_is,
        ),
        row(
            "write → on remote p50 ms, a person's commit racing every 10th write, vs the push loop",
            p(all, 0.5),
            p(minimum, 0.5),
            false,
            "git2: blob, tree, commit, Remote::push to a bare remote over file:// (no race)",
        ),
        row(
            &format!("{BULK} pending writes replayed onto a person's commit of {BULK} files, s"),
            bulk.raced.as_secs_f64(),
            bulk.plain.as_secs_f64(),
            false,
            &format!("the same {BULK} writes published without a race"),
        ),
    ]
}

/// The rows, aims and notes.
fn report(
    n: usize,
    quick: bool,
    unraced: &Raced,
    race: &Raced,
    baselines: &Baselines,
    bulk: &BulkReplay,
) -> Value {
    let sorted = Sorted::of(unraced, race, baselines);
    let Sorted {
        calm,
        all,
        raced,
        floor,
        ..
    } = &sorted;
    let p = percentile;
    let rows = rows(&sorted, bulk);
    let (all50, floor50, calm50) = (p(all, 0.5), p(floor, 0.5), p(calm, 0.5));
    let notes = vec![
        json!(format!(
            "Aim: mirror latency with a person's commit racing every 10th write ≤ 2× the in-place floor: p50 {all50:.2} ms against {floor50:.2} ms, {:.2}×, {}. Breakdown: the same writes before any race, with the claim acting beside the mirror (the mirror keeping each object's value for the three-way rule, a catch-up adopting each create), p50 {calm50:.2} ms ({:.2}× the floor): the races add {:.2} ms to the p50 ({:.2}×); the raced writes themselves (refused push or read before publishing, fetch, field-level replay, push) p50 {:.2} ms.",
            all50 / floor50.max(f64::EPSILON),
            met(all50 <= 2.0 * floor50),
            calm50 / floor50.max(f64::EPSILON),
            all50 - calm50,
            all50 / calm50.max(f64::EPSILON),
            p(raced, 0.5),
        )),
        json!(format!(
            "Aim: {BULK} pending writes replayed onto a person's commit of {BULK} files in ≤ 2 s: {:.2} s ({:.2} s without the race), {}.",
            bulk.raced.as_secs_f64(),
            bulk.plain.as_secs_f64(),
            met(bulk.raced <= Duration::from_secs(2))
        )),
        json!(format!(
            "{n} writes over {OBJECTS} objects without a race (the first {OBJECTS} create), then {n} more with one, commit window 0s, one writer, the default claim acting (`serve --apply`, no push notices); before every 10th write of the second run a person's commit annotated that write's file straight in the remote ({} raced writes). Failures {}, answers whose commit was not the remote's tip {}, raced writes whose file lacked the token or the person's annotation {}.",
            race.replayed.len(),
            race.failures + unraced.failures,
            race.tip_mismatch + unraced.tip_mismatch,
            race.lost
        )),
        json!(format!(
            "Bulk: {BULK} ConfigMaps created and pushed, then {BULK} updates answered once stored inside a 30 s commit window, the last waiting for the push: timed from that last write to its answer, once as they are and once after a person's commit annotating all {BULK} files landed in the remote. Files of the final tip lacking the update or the annotation: {}; failed writes {}.",
            bulk.lost, bulk.failures
        )),
        json!(format!(
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    json!({
        "scenario": "replay-race",
        "parameters": {"writes": n, "objects": OBJECTS, "race_every": RACE_EVERY, "bulk": BULK, "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(all50), "raced_p50_ms": round2(p(raced, 0.5)), "bulk_replay_s": round2(bulk.raced.as_secs_f64()), "lost": race.lost + bulk.lost},
        "baseline": {"floor_p50_ms": round2(floor50), "bulk_plain_s": round2(bulk.plain.as_secs_f64())},
        "rows": rows,
        "notes": notes,
    })
}

#[cfg(test)]
mod tests {
    use super::with_note;

    #[test]
    fn a_note_is_added_once_and_then_replaced() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  token: t\n";
        let once = with_note(text, "p1");
        assert_eq!(
            once,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    person: p1\n  name: a\ndata:\n  token: t\n"
        );
        let twice = with_note(&once, "p2");
        assert_eq!(twice, once.replace("p1", "p2"));
    }
}
