//! CPU time of this process's threads over a stretch of a run, by thread name, read from
//! `/proc/self/task/*/schedstat` (nanoseconds on a CPU, and waiting on a run queue for one):
//! where a level's cores went (the branch worker's one thread, the store's, the async
//! runtime's), so a figure that is bound by the machine says so.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Value, json};

use crate::server::round2;

/// One thread's name and its scheduler times so far.
struct Sched {
    name: String,
    /// Nanoseconds it ran.
    ran: u64,
    /// Nanoseconds it was ready to run but waited for a CPU.
    queued: u64,
}

/// Each live thread's scheduler times at one moment.
pub struct ThreadTimes {
    at: Instant,
    threads: BTreeMap<u64, Sched>,
}

impl ThreadTimes {
    /// The threads of this process now; empty where `/proc` cannot be read.
    pub fn now() -> Self {
        let mut threads = BTreeMap::new();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                    continue;
                };
                if let Some(sched) = thread_sched(&task.path()) {
                    threads.insert(tid, sched);
                }
            }
        }
        Self {
            at: Instant::now(),
            threads,
        }
    }

    /// CPU seconds each thread name spent since `earlier`, over the wall time between them.
    /// Threads that ended in between are missing; threads started in between count whole.
    pub fn since(&self, earlier: &ThreadTimes) -> CpuUse {
        let mut by_name: BTreeMap<String, f64> = BTreeMap::new();
        let mut queued_by_name: BTreeMap<String, f64> = BTreeMap::new();
        for (tid, now) in &self.threads {
            let (ran, queued) = earlier
                .threads
                .get(tid)
                .filter(|before| before.name == now.name)
                .map_or((0, 0), |before| (before.ran, before.queued));
            *by_name.entry(now.name.clone()).or_default() +=
                now.ran.saturating_sub(ran) as f64 / 1e9;
            *queued_by_name.entry(now.name.clone()).or_default() +=
                now.queued.saturating_sub(queued) as f64 / 1e9;
        }
        CpuUse {
            wall: self.at.duration_since(earlier.at).as_secs_f64(),
            by_name,
            queued_by_name,
        }
    }
}

/// A thread's name (`comm`, at most 15 bytes) and its `schedstat`: nanoseconds run, nanoseconds
/// waited on a run queue, time slices.
fn thread_sched(task: &std::path::Path) -> Option<Sched> {
    let name = std::fs::read_to_string(task.join("comm")).ok()?;
    let stat = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut fields = stat.split_whitespace().map(str::parse::<u64>);
    let ran = fields.next()?.ok()?;
    let queued = fields.next()?.ok()?;
    Some(Sched {
        name: name.trim().to_string(),
        ran,
        queued,
    })
}

/// Where a stretch's CPU time went.
#[derive(Debug, Clone, Default)]
pub struct CpuUse {
    /// Its wall time, seconds.
    pub wall: f64,
    /// CPU seconds by thread name.
    pub by_name: BTreeMap<String, f64>,
    /// Seconds each thread name's threads were ready to run but waited for a CPU.
    pub queued_by_name: BTreeMap<String, f64>,
}

impl CpuUse {
    /// Cores in use on average: all CPU seconds over the wall time.
    pub fn cores(&self) -> f64 {
        self.by_name.values().sum::<f64>() / self.wall.max(f64::EPSILON)
    }

    /// The share of the wall time the threads whose names start with `prefix` were running
    /// (above 1 when several such threads ran at once).
    pub fn busy(&self, prefix: &str) -> f64 {
        self.share(&self.by_name, prefix)
    }

    /// The share of the wall time the threads whose names start with `prefix` were ready to
    /// run but waited for a CPU.
    pub fn queued(&self, prefix: &str) -> f64 {
        self.share(&self.queued_by_name, prefix)
    }

    fn share(&self, seconds: &BTreeMap<String, f64>, prefix: &str) -> f64 {
        seconds
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, s)| s)
            .sum::<f64>()
            / self.wall.max(f64::EPSILON)
    }

    /// As JSON: the wall time, and each thread name's CPU seconds and run-queue seconds.
    pub fn to_json(&self) -> Value {
        let rounded = |m: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
            m.iter()
                .map(|(name, s)| (name.clone(), round4(*s)))
                .collect()
        };
        json!({"wall_s": round4(self.wall), "cpu_s_by_thread": rounded(&self.by_name),
               "run_queue_s_by_thread": rounded(&self.queued_by_name),
               "cores": round2(self.cores())})
    }
}

/// `x` to 4 decimals.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_shows_its_cpu_time_under_its_name() {
        let before = ThreadTimes::now();
        let spun = std::thread::Builder::new()
            .name("cpu-test-spin".into())
            .spawn(|| {
                let start = Instant::now();
                let mut x = 0u64;
                while start.elapsed().as_millis() < 300 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                // Read while still alive: an ended thread leaves /proc/self/task.
                (ThreadTimes::now(), x)
            })
            .expect("spawn");
        let (after, _) = spun.join().expect("join");
        let used = after.since(&before);
        let spin = used.by_name.get("cpu-test-spin").copied().unwrap_or(0.0);
        // A 300 ms spin that got a CPU a tenth of the time still shows 30 ms; it cannot show
        // more than the wall time.
        assert!(spin >= 0.03, "a 300 ms spin counted {spin} s: {used:?}");
        assert!(spin <= used.wall, "{used:?}");
        assert!(used.busy("cpu-test") > 0.0, "{used:?}");
        assert!(used.cores() >= used.busy("cpu-test"));
    }
}
