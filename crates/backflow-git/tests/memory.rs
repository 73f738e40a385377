//! What a branch worker that commits all day keeps in memory, counted with the C allocator's own
//! statistics (libgit2 allocates through `malloc`, not through Rust's allocator, and Rust's
//! default allocator is `malloc` too), never timed. A test binary of its own, so no other test
//! allocates in the process while it counts.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

#[allow(
    dead_code,
    unused_imports,
    clippy::ref_option,
    reason = "shared with the main test binary, which uses the rest"
)]
#[path = "backflow_git/support.rs"]
mod support;

use backflow_git::FileRemote;

use support::{Bare, put, worker};

/// Bytes the process holds from `malloc` now: the arenas' used chunks and the mapped ones.
fn allocated() -> usize {
    // SAFETY: `mallinfo2` only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    info.uordblks + info.hblkhd
}

/// Every commit writes new trees, and libgit2 caches parsed objects process-wide: with its own
/// bound (256 MiB) the cache grew by about 3.5 KiB per commit for as long as a server ran, which is
/// how "12 KB per commit never released" showed up. Bounded, the cache fills and then holds; past
/// that, a commit must leave nothing behind.
#[test]
fn commits_leave_nothing_behind_once_the_object_cache_is_full() {
    // Small, so the warm-up fills it; the default bound is the same mechanism at 32 MiB.
    assert!(
        backflow_git::set_object_cache_limit(1 << 20),
        "the bound must be set before the first repository is opened"
    );
    let bare = Bare::new();
    let cache = tempfile::tempdir().unwrap();
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    let commit = |w: &mut backflow_git::BranchWorker, i: usize| {
        w.submit(put(&format!("cm-{}", i % 50), &format!("value {i}")));
        w.poll();
        w.take_events();
    };
    // Enough to fill a 1 MiB cache (and every other bounded structure) several times.
    (0..1_000).for_each(|i| commit(&mut w, i));
    // Roll-ups run on a thread beside the worker's: counted at rest, none in flight.
    w.settle();
    let before = allocated();
    const COUNTED: usize = 1_500;
    (1_000..1_000 + COUNTED).for_each(|i| commit(&mut w, i));
    w.settle();
    let after = allocated();
    let stats = w.stats();
    assert_eq!(
        stats.commits,
        1_000 + COUNTED as u64,
        "one commit per change"
    );
    let per_commit = after.saturating_sub(before) / COUNTED;
    assert!(
        per_commit < 256,
        "{per_commit} bytes retained per commit ({before} → {after} bytes over {COUNTED} commits)"
    );
}
