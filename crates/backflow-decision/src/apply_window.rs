//! The apply window's verdicts: which write seen while an apply is under way is the apply
//! landing (kept out of Git), which is somebody's edit, and which is the applier writing over an
//! edit made in the window (a collision: withheld, and repaired).
//!
//! A window opens at the flush before an apply and closes when its operation ends (plus a
//! grace). An edit whose watch event arrives while it is open was decided after the flush's
//! mark, whenever it was made, so the apply's commit does not hold it. Inside it, a write whose
//! newest field managers are the applier's alone, to an object nobody else edited in the window,
//! is the apply landing: mirrored, it would carry the applied commit's values onto a newer tip.
//! The edit is captured from its own watch event: a forced apply may take the editor's fields
//! over, so managedFields read after the apply cannot be trusted to show it.
//!
//! Pure: the mirror feeds it what each watch event says (managedFields, second precision), the
//! simulator what its model's writes are.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use backflow_branch::{Intent, ObjectJson};

/// How long an apply window stays open after its operation ended: the apply's last watch events
/// may still be on their way.
pub const APPLY_WINDOW_GRACE: Duration = Duration::from_secs(2);

/// The field managers of the appliers backflow holds: its own, Flux's kustomize-controller and
/// Argo CD's application controller, which writes as `argocd-controller` with server-side apply
/// and under its process's name with client-side apply (its default). A write by these alone is
/// an applier's.
pub const APPLIER_MANAGERS: &[&str] = &[
    "backflow-applier",
    "kustomize-controller",
    "argocd-controller",
    "argocd-application-controller",
];

/// One managedFields entry (not a status one): who wrote, in which Unix second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedWrite {
    /// The field manager.
    pub manager: String,
    /// When, in whole seconds since the Unix epoch (managedFields have second precision).
    pub second: i64,
}

/// Who wrote an object, as its managedFields say: every entry but status ones (a controller
/// reporting status edits nothing Git holds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writes(Vec<ManagedWrite>);

impl Writes {
    /// The writes `entries` list, in their order.
    #[must_use]
    pub fn new(entries: Vec<ManagedWrite>) -> Self {
        Self(entries)
    }

    /// The manager of the newest entry (of the ties, the last listed).
    #[must_use]
    pub fn newest_manager(&self) -> Option<&str> {
        let newest = self.newest()?;
        self.0
            .iter()
            .rev()
            .find(|w| w.second == newest)
            .map(|w| w.manager.as_str())
            .filter(|m| !m.is_empty())
    }

    /// The second of the newest entry.
    #[must_use]
    pub fn newest(&self) -> Option<i64> {
        self.0.iter().map(|w| w.second).max()
    }

    /// Whether every entry of second `at` is by one of `managers` (a tie with another manager
    /// is not).
    #[must_use]
    pub fn only_by_at<S: AsRef<str>>(&self, managers: &[S], at: i64) -> bool {
        self.0
            .iter()
            .filter(|w| w.second == at)
            .all(|w| managers.iter().any(|x| x.as_ref() == w.manager))
    }

    /// The second of the newest entry of a manager not in `managers`.
    #[must_use]
    pub fn newest_other<S: AsRef<str>>(&self, managers: &[S]) -> Option<i64> {
        self.0
            .iter()
            .filter(|w| !managers.iter().any(|x| x.as_ref() == w.manager))
            .map(|w| w.second)
            .max()
    }

    /// Whether this event is, by all the seconds can tell, an applier's write of what Git held:
    /// an applier wrote in the newest second, and no other manager's entry is newer than
    /// `others_seen` (what the object's previous event showed). A tie in one second with a
    /// manager seen before (a person's create just before an apply) is then the applier's;
    /// a person's second edit in the same second cannot be told from it, so such an event is
    /// still mirrored, only as an echo (see the branch worker's `Origin::Echo`).
    #[must_use]
    pub fn looks_like_applier(&self, others_seen: Option<i64>) -> bool {
        let Some(newest) = self.newest() else {
            return false;
        };
        let applier_wrote = self
            .0
            .iter()
            .any(|w| w.second == newest && APPLIER_MANAGERS.contains(&w.manager.as_str()));
        let others_newer = self
            .newest_other(APPLIER_MANAGERS)
            .is_some_and(|o| others_seen.is_none_or(|seen| o > seen));
        applier_wrote && !others_newer
    }

    /// The second of the newest entry of one of `managers`.
    #[must_use]
    pub fn newest_by<S: AsRef<str>>(&self, managers: &[S]) -> Option<i64> {
        self.0
            .iter()
            .filter(|w| managers.iter().any(|x| x.as_ref() == w.manager))
            .map(|w| w.second)
            .max()
    }

    /// Who wrote the object as these entries date it: what the next event is compared with.
    #[must_use]
    pub fn writers(&self) -> Writers {
        Writers {
            applier: self.newest_by(APPLIER_MANAGERS),
            others: self.newest_other(APPLIER_MANAGERS),
        }
    }

    /// Whether this event's write is an applier's, told from the object's `previous` event:
    /// an applier's entry is newer than it was, dated in the newest second, and no other
    /// manager's is. A write re-dates only its own manager's entry (another's may shrink, or
    /// vanish when a force apply takes all its fields), so this holds even when other managers
    /// wrote in the same second, which seconds alone cannot tell.
    #[must_use]
    pub fn applier_wrote_since(&self, previous: Writers) -> bool {
        let now = self.writers();
        let Some(applier) = now.applier else {
            return false;
        };
        let others_newer = match (now.others, previous.others) {
            (Some(o), Some(p)) => o > p,
            (Some(_), None) => true,
            (None, _) => false,
        };
        self.newest() == Some(applier)
            && previous.applier.is_none_or(|p| applier > p)
            && !others_newer
    }

    /// Whether the newest write was made by `managers` alone.
    #[must_use]
    pub fn newest_only_by<S: AsRef<str>>(&self, managers: &[S]) -> bool {
        self.newest()
            .is_some_and(|at| self.only_by_at(managers, at))
    }
}

/// What an object's watch event showed of who wrote it, kept until its next event: the newest
/// second of an applier's entry and of any other manager's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writers {
    /// The newest entry of one of [`APPLIER_MANAGERS`].
    pub applier: Option<i64>,
    /// The newest entry of any other manager.
    pub others: Option<i64>,
}

/// The recent apply windows of one target, oldest first: when each opened (the flush) and until
/// when it counts (its operation's end plus a grace), in nanoseconds since the Unix epoch, and
/// what the applier announced it deletes in it. Kept beyond their close, so a write of an
/// apply whose watch event arrives after the next window opened is still known as that apply's.
#[derive(Debug, Clone)]
pub struct WindowHistory<K> {
    windows: VecDeque<WindowRecord<K>>,
}

#[derive(Debug, Clone)]
struct WindowRecord<K> {
    opened: u128,
    ends: Option<u128>,
    pruned: BTreeSet<K>,
}

impl<K> Default for WindowHistory<K> {
    fn default() -> Self {
        Self {
            windows: VecDeque::new(),
        }
    }
}

const NANOS: u128 = 1_000_000_000;

fn second_of(nanos: u128) -> i64 {
    i64::try_from(nanos / NANOS).unwrap_or(i64::MAX)
}

impl<K: Ord + Clone> WindowHistory<K> {
    /// How many windows are kept.
    pub const KEPT: usize = 8;

    /// A window opens at `at` (a flush); one still open ends there.
    pub fn open(&mut self, at: u128) {
        if let Some(last) = self.windows.back_mut()
            && last.ends.is_none()
        {
            last.ends = Some(at);
        }
        self.windows.push_back(WindowRecord {
            opened: at,
            ends: None,
            pruned: BTreeSet::new(),
        });
        while self.windows.len() > Self::KEPT {
            self.windows.pop_front();
        }
    }

    /// The operation of the open window ended at `at` (nanoseconds): the window closes after
    /// [`APPLY_WINDOW_GRACE`], the apply's last watch events may still be on their way.
    pub fn ended(&mut self, at: u128) {
        self.close(at + APPLY_WINDOW_GRACE.as_nanos());
    }

    /// The open window's operation ended: it counts until `ends` (the end plus the grace).
    pub fn close(&mut self, ends: u128) {
        if let Some(last) = self.windows.back_mut()
            && last.ends.is_none()
        {
            last.ends = Some(ends);
        }
    }

    /// The applier of the window whose operation runs is about to delete `key`.
    pub fn note_prune(&mut self, key: K) {
        if let Some(last) = self.windows.back_mut()
            && last.ends.is_none()
        {
            last.pruned.insert(key);
        }
    }

    /// The window in which the applier announced deleting `key`, if a kept one did; the
    /// announcement is used up (a later delete of the object is somebody's).
    pub fn take_prune(&mut self, key: &K) -> Option<u128> {
        for w in self.windows.iter_mut().rev() {
            if w.pruned.remove(key) {
                return Some(w.opened);
            }
        }
        None
    }

    /// The kept windows as a watch stream judges against them at `now`.
    #[must_use]
    pub fn spans(&self, now: u128) -> Vec<WindowSpan> {
        self.windows
            .iter()
            .map(|w| WindowSpan {
                id: w.opened,
                since: second_of(w.opened),
                until: w.ends.map(second_of),
                open: w.ends.is_none_or(|e| now < e),
            })
            .collect()
    }
}

/// One apply window as a watch stream sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpan {
    /// Tells it from any other window (when it opened, in nanoseconds since the epoch).
    pub id: u128,
    /// The second it opened (the flush).
    pub since: i64,
    /// The last second it counts for, once its operation ended.
    pub until: Option<i64>,
    /// Whether it is open now: an edit seen now was decided after its flush's mark.
    pub open: bool,
}

impl WindowSpan {
    /// Whether a write made in `second` may be its apply's.
    fn covers(&self, second: i64) -> bool {
        self.since <= second && self.until.is_none_or(|u| second <= u)
    }
}

/// What a write is, judged against its target's apply windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Somebody's edit (or a write the windows cannot prove is an applier's): mirrored.
    Edit,
    /// The applier's alone, made in no window's span (an applier acting on its own): mirrored
    /// as an echo of what Git held, counted `late`.
    Late,
    /// An apply landing: not mirrored.
    Landing,
    /// The applier's write over a live edit made in its window: withheld from Git (the edit
    /// keeps its value there), and a Repair is asked for.
    Collision,
    /// Another applier write over the same edit in the same window (a stamp after the apply):
    /// withheld too, without asking again.
    OverCollided,
}

/// How a mirrored write goes to Git.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mirrored {
    /// Somebody's edit: it wins over a push made while it was on its way.
    Edit,
    /// An applier's write of what Git held: never written over a push made since.
    Echo,
}

impl Mirrored {
    /// `write` (the object as the watch event showed it) as it goes to Git: an echo is marked
    /// one, and either is a change of `before`, what the stream last submitted of the object
    /// (or saw an apply land) — so the replay lays it onto Git field by field. An echo too: one
    /// that is not the applier's (a person's edit in its second looks the same) keeps what a
    /// push gained since in the fields it did not change.
    #[must_use]
    pub fn intent(self, write: Intent, before: Option<Arc<ObjectJson>>) -> Intent {
        let write = match self {
            Self::Echo => write.echo(),
            Self::Edit => write,
        };
        match before {
            Some(before) => write.edit_of(before),
            None => write,
        }
    }
}

impl Verdict {
    /// Whether and how a write judged `self` goes to Git (`writes`: its managedFields;
    /// `previous`: who its object's previous event showed wrote it): not at all (the landing,
    /// a withheld write), as an edit, or as an echo — made in no window's span, or, by all the
    /// seconds can tell, an applier's (acting on its own, or in the second of a create it
    /// cannot be told from).
    #[must_use]
    pub fn mirrored_as(self, writes: &Writes, previous: Option<Writers>) -> Option<Mirrored> {
        match self {
            Self::Landing | Self::Collision | Self::OverCollided => None,
            Self::Late => Some(Mirrored::Echo),
            Self::Edit if writes.looks_like_applier(previous.and_then(|p| p.others)) => {
                Some(Mirrored::Echo)
            }
            Self::Edit => Some(Mirrored::Edit),
        }
    }
}

/// The live edits one watch stream saw inside each kept window, captured from their own watch
/// events, by object key `K`.
///
/// After a write judged an [`Verdict::Edit`] is submitted to the branch worker, the stream says
/// so with [`WindowEdits::submitted`] and the windows it reads then: a window that opens later
/// flushes the edit into the commit it applies, so its apply writing the object is no collision,
/// and a window that opened between the judging and the submit may not (it is captured there).
#[derive(Debug, Clone)]
pub struct WindowEdits<K> {
    edits: BTreeMap<u128, BTreeMap<K, WindowEdit>>,
    judged: Option<JudgedEdit<K>>,
}

impl<K> Default for WindowEdits<K> {
    fn default() -> Self {
        Self {
            edits: BTreeMap::new(),
            judged: None,
        }
    }
}

/// The edit judged last, until the stream says it submitted it.
#[derive(Debug, Clone)]
struct JudgedEdit<K> {
    key: K,
    /// Its second; none for a delete (captured at each window's own second).
    at: Option<i64>,
}

/// A live edit seen in a window.
#[derive(Debug, Clone, Copy)]
struct WindowEdit {
    /// Its second.
    at: i64,
    /// Whether an applier write already landed over it (and a Repair was asked for).
    collided: bool,
    /// Whether its intent reached the branch worker, and before which windows.
    flushing: Flushing,
}

/// Which windows' flushes hold an edit: those opened after its intent reached the branch
/// worker (a flush is queued behind every intent submitted before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushing {
    /// Not known to be submitted: no window is known to hold it.
    Unsubmitted,
    /// Submitted while this was the newest window (none: no window was kept).
    SubmittedAfter(Option<u128>),
}

impl WindowEdit {
    fn new(at: i64) -> Self {
        Self {
            at,
            collided: false,
            flushing: Flushing::Unsubmitted,
        }
    }

    fn collide(&mut self) -> Verdict {
        if self.collided {
            return Verdict::OverCollided;
        }
        self.collided = true;
        Verdict::Collision
    }

    /// Whether one of `windows` opened after the edit was submitted: its flush holds the edit.
    fn flushed_by_one_of(&self, windows: &[WindowSpan]) -> bool {
        match self.flushing {
            Flushing::Unsubmitted => false,
            Flushing::SubmittedAfter(newest) => {
                windows.iter().any(|w| newest.is_none_or(|n| w.id > n))
            }
        }
    }
}

impl<K: Ord + Clone> WindowEdits<K> {
    /// Forgets the edits of windows no longer kept; returns the open one.
    fn enter(&mut self, windows: &[WindowSpan]) -> Option<WindowSpan> {
        self.edits
            .retain(|id, _| windows.iter().any(|w| w.id == *id));
        windows.iter().rev().find(|w| w.open).copied()
    }

    fn capture(&mut self, key: &K, window: WindowSpan, at: i64) {
        self.edits
            .entry(window.id)
            .or_default()
            .insert(key.clone(), WindowEdit::new(at));
    }

    /// The write of `key` judged last an [`Verdict::Edit`] was submitted to the branch worker;
    /// `windows` were read after the submit. A window open now that opened after the judging
    /// may have flushed before the submit: the edit is captured there too. Every window opened
    /// after these flushes it.
    pub fn submitted(&mut self, key: &K, windows: &[WindowSpan]) {
        let Some(judged) = self.judged.take().filter(|j| j.key == *key) else {
            return;
        };
        self.enter(windows);
        for w in windows.iter().filter(|w| w.open) {
            self.edits
                .entry(w.id)
                .or_default()
                .entry(key.clone())
                .or_insert_with(|| WindowEdit::new(judged.at.unwrap_or(w.since)));
        }
        let newest = windows.iter().map(|w| w.id).max();
        for edit in self.edits.values_mut().filter_map(|e| e.get_mut(key)) {
            edit.flushing = Flushing::SubmittedAfter(newest);
        }
    }

    fn edit_in(&mut self, window: u128, key: &K) -> Option<&mut WindowEdit> {
        self.edits.get_mut(&window)?.get_mut(key)
    }

    /// Judges a write of `key` (`writes`: its managedFields as its watch event carries them;
    /// `previous`: who its previous event showed wrote it, when this stream saw one) against
    /// `windows`, and remembers it when it is an edit made while one is open. An edit is said
    /// [`WindowEdits::submitted`] once its intent is handed to the branch worker.
    pub fn judge(
        &mut self,
        key: &K,
        writes: &Writes,
        previous: Option<Writers>,
        windows: &[WindowSpan],
    ) -> Verdict {
        self.enter(windows);
        self.judged = None;
        let Some(newest) = writes.newest() else {
            return Verdict::Edit;
        };
        // A create, an edit and the apply over it in one second: the seconds tie, but the
        // entries' change since the previous event shows the applier wrote. Judged an edit,
        // the applied value would be mirrored over the edit.
        let applier_alone = writes.only_by_at(APPLIER_MANAGERS, newest)
            || previous.is_some_and(|p| writes.applier_wrote_since(p));
        if !applier_alone {
            self.judged = Some(JudgedEdit {
                key: key.clone(),
                at: Some(newest),
            });
            // An edit whose event arrives while a window is open was decided after the
            // flush's mark, whenever it was made: the apply's commit does not hold it. One
            // arriving later, made in a window's span, may have been made after its flush.
            for w in windows.iter().filter(|w| w.open || w.covers(newest)) {
                self.capture(key, *w, newest);
            }
            return Verdict::Edit;
        }
        // The applies this write may be from: their windows span its second.
        let from: Vec<WindowSpan> = windows
            .iter()
            .copied()
            .filter(|w| w.covers(newest))
            .collect();
        if from.is_empty() {
            return Verdict::Late;
        }
        // The edit's event came first, so in the same second the edit arrived first. Every
        // applier write over it in its window is withheld (Git keeps the edit until the
        // Repair, which runs in a window of its own); only the first asks for the Repair.
        // Seconds cannot always tell which of two windows a write is from: an edit of either
        // that no write collided with yet wins (a Repair too many costs an apply; one too few
        // loses the edit). An edit a window among them flushed is in that apply's commit:
        // whichever apply wrote, the later one leaves the object as Git holds it.
        let mut collided = false;
        for w in &from {
            match self.edit_in(w.id, key).filter(|e| newest >= e.at) {
                Some(edit) if edit.flushed_by_one_of(&from) => {}
                Some(edit) if !edit.collided => return edit.collide(),
                Some(_) => collided = true,
                None => {}
            }
        }
        if collided {
            Verdict::OverCollided
        } else {
            // Nobody's edit was seen in its window: what another manager wrote in the flush's
            // second came before the flush (its event arrived before the window opened), so
            // the applied commit holds it.
            Verdict::Landing
        }
    }

    /// Judges a delete of `key` against `windows`; `pruned_in` is the window in which the
    /// applier announced it ([`WindowHistory::take_prune`]). The applier's delete is its
    /// apply landing, or, over a live edit seen in that window, a collision (Git keeps the
    /// edit, and the Repair brings the object back). Somebody's delete seen while a window is
    /// open is remembered like an edit: the applier re-creating the object after it collides.
    pub fn judge_delete(
        &mut self,
        key: &K,
        windows: &[WindowSpan],
        pruned_in: Option<u128>,
    ) -> Verdict {
        let open = self.enter(windows);
        self.judged = None;
        if let Some(window) = pruned_in {
            return match self.edit_in(window, key) {
                Some(edit) => edit.collide(),
                None => Verdict::Landing,
            };
        }
        if let Some(open) = open {
            self.capture(key, open, open.since);
        }
        self.judged = Some(JudgedEdit {
            key: key.clone(),
            at: None,
        });
        Verdict::Edit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(entries: &[(&str, i64)]) -> Writes {
        Writes::new(
            entries
                .iter()
                .map(|(m, s)| ManagedWrite {
                    manager: (*m).to_string(),
                    second: *s,
                })
                .collect(),
        )
    }

    /// A window opened at second `since`, its operation still running.
    fn open(since: i64) -> WindowSpan {
        WindowSpan {
            id: u128::try_from(since).unwrap_or_default() * NANOS,
            since,
            until: None,
            open: true,
        }
    }

    fn ended(since: i64, until: i64) -> WindowSpan {
        WindowSpan {
            until: Some(until),
            open: false,
            ..open(since)
        }
    }

    fn judge(entries: &[(&str, i64)], windows: &[WindowSpan]) -> Verdict {
        WindowEdits::default().judge(&"a", &writes(entries), None, windows)
    }

    /// What goes to Git: not the landing nor a withheld write; an applier's write made in no
    /// window, or one only its managedFields tell apart, as an echo; an edit as an edit.
    #[test]
    fn a_verdict_says_whether_and_how_a_write_is_mirrored() {
        let person = writes(&[("backflow-applier", 90), ("kubectl-edit", 120)]);
        let applier = writes(&[("kubectl-edit", 50), ("backflow-applier", 120)]);
        for withheld in [Verdict::Landing, Verdict::Collision, Verdict::OverCollided] {
            assert_eq!(withheld.mirrored_as(&person, None), None);
        }
        assert_eq!(
            Verdict::Late.mirrored_as(&person, None),
            Some(Mirrored::Echo)
        );
        assert_eq!(
            Verdict::Edit.mirrored_as(&person, None),
            Some(Mirrored::Edit)
        );
        let seen = Some(writes(&[("kubectl-edit", 50)]).writers());
        assert_eq!(
            Verdict::Edit.mirrored_as(&applier, seen),
            Some(Mirrored::Echo),
            "an applier wrote last and nobody else since the previous event"
        );
        let edited_since = Some(writes(&[("kubectl-edit", 40)]).writers());
        assert_eq!(
            Verdict::Edit.mirrored_as(&applier, edited_since),
            Some(Mirrored::Edit),
            "another manager wrote since the previous event"
        );
    }

    /// An echo goes to Git as a change of what the stream last submitted, as an edit does: a
    /// person's edit in the applier's second (an echo by the seconds) must not carry the other
    /// fields over a push made since.
    #[test]
    fn an_echo_and_an_edit_are_each_a_change_of_what_was_submitted_before() {
        use backflow_api::{GroupResource, ObjectKey};
        use backflow_branch::{Baseline, Origin};
        let key = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "a");
        let write = || Intent::put("apps", key.clone(), serde_json::json!({"x": "2"}));
        let before = Arc::new(ObjectJson::new(&serde_json::json!({"x": "1"})));
        for mirrored in [Mirrored::Echo, Mirrored::Edit] {
            let intent = mirrored.intent(write(), Some(before.clone()));
            assert_eq!(
                intent.baseline,
                Some(Baseline::Value(before.clone())),
                "{mirrored:?}"
            );
            let echo = matches!(intent.origin, Origin::Echo { .. });
            assert_eq!(echo, mirrored == Mirrored::Echo);
            assert_eq!(
                mirrored.intent(write(), None).baseline,
                None,
                "nothing seen before"
            );
        }
    }

    #[test]
    fn an_apply_landing_is_the_applier_alone_newest_inside_its_window() {
        let landing = [("kubectl-edit", 50), ("backflow-applier", 101)];
        assert_eq!(judge(&landing, &[open(100)]), Verdict::Landing);
        assert_eq!(judge(&landing, &[]), Verdict::Late, "no window: an edit");
        let created_in_the_flush_second = [("kubectl-edit", 100), ("backflow-applier", 101)];
        assert_eq!(
            judge(&created_in_the_flush_second, &[open(100)]),
            Verdict::Landing,
            "an edit whose event came before the window is in the applied commit"
        );
        let tie = [("kubectl-edit", 101), ("backflow-applier", 101)];
        assert_eq!(
            judge(&tie, &[open(100)]),
            Verdict::Edit,
            "a tie with another manager is mirrored"
        );
        let before = [("backflow-applier", 90)];
        assert_eq!(
            judge(&before, &[open(100)]),
            Verdict::Late,
            "older than the window"
        );
        let user = [("backflow-applier", 90), ("kubectl-edit", 120)];
        assert_eq!(judge(&user, &[open(100)]), Verdict::Edit);
        assert_eq!(judge(&[], &[open(100)]), Verdict::Edit, "no managedFields");
    }

    #[test]
    fn a_landing_arriving_after_the_next_window_opened_is_still_its_applys() {
        let late_echo = [("backflow-applier", 101)];
        let windows = [ended(100, 104), open(110)];
        assert_eq!(judge(&late_echo, &windows), Verdict::Landing);
        assert_eq!(
            judge(&late_echo, &[ended(100, 104)]),
            Verdict::Landing,
            "after its window closed"
        );
        let outside = [("backflow-applier", 106)];
        assert_eq!(
            judge(&outside, &windows),
            Verdict::Late,
            "in no window's span"
        );
        assert_eq!(judge(&outside, &[ended(100, 104)]), Verdict::Late);
        // An edit captured in the first window collides with that apply's late write.
        let mut edits = WindowEdits::default();
        let early = [ended(100, 104), open(110)];
        assert_eq!(
            edits.judge(&"a", &writes(&[("kubectl-edit", 100)]), None, &[open(100)]),
            Verdict::Edit
        );
        assert_eq!(
            edits.judge(&"a", &writes(&[("backflow-applier", 101)]), None, &early),
            Verdict::Collision
        );
        // An edit made in a window whose event arrives after it closed (a slow watch) is
        // remembered for that window too: that apply's late write over it collides.
        let mut slow = WindowEdits::default();
        assert_eq!(
            slow.judge(&"s", &writes(&[("kubectl-edit", 102)]), None, &early),
            Verdict::Edit
        );
        assert_eq!(
            slow.judge(&"s", &writes(&[("backflow-applier", 103)]), None, &early),
            Verdict::Collision
        );
        // The next apply's write over it is not a collision: its commit holds the edit.
        assert_eq!(
            edits.judge(&"a", &writes(&[("backflow-applier", 111)]), None, &early),
            Verdict::Landing
        );
        // An edit of the next window, whose write's second both windows span, collides even
        // though the earlier window's edit already did.
        let mut edits = WindowEdits::default();
        let first = [open(100)];
        assert_eq!(
            edits.judge(&"a", &writes(&[("kubectl-edit", 100)]), None, &first),
            Verdict::Edit
        );
        assert_eq!(
            edits.judge(&"a", &writes(&[("backflow-applier", 101)]), None, &first),
            Verdict::Collision
        );
        let overlapping = [ended(100, 110), open(110)];
        assert_eq!(
            edits.judge(&"a", &writes(&[("kubectl-edit", 109)]), None, &overlapping),
            Verdict::Edit
        );
        assert_eq!(
            edits.judge(
                &"a",
                &writes(&[("backflow-applier", 110)]),
                None,
                &overlapping
            ),
            Verdict::Collision
        );
    }

    #[test]
    fn an_edit_submitted_before_a_window_opened_is_in_that_applys_commit() {
        let create = writes(&[("kubectl-create", 100)]);
        let applied = writes(&[("backflow-applier", 102)]);
        let first = [open(100)];
        // The next window opened while the first one's grace still spans the apply's second.
        let both = [ended(100, 102), open(101)];
        // A live create seen in the first window and submitted while it was the newest: the
        // second window's flush holds it, so the write is a landing, whichever apply made it.
        let mut edits = WindowEdits::default();
        assert_eq!(edits.judge(&"a", &create, None, &first), Verdict::Edit);
        edits.submitted(&"a", &first);
        assert_eq!(edits.judge(&"a", &applied, None, &both), Verdict::Landing);
        // Not said to be submitted: no flush is known to hold it, so it collides.
        let mut unsure = WindowEdits::default();
        assert_eq!(unsure.judge(&"a", &create, None, &first), Verdict::Edit);
        unsure.submitted(&"b", &first);
        assert_eq!(
            unsure.judge(&"a", &applied, None, &both),
            Verdict::Collision
        );
        // Submitted only after the second window opened: its flush may have gone first.
        let mut after = WindowEdits::default();
        assert_eq!(after.judge(&"a", &create, None, &first), Verdict::Edit);
        after.submitted(&"a", &both);
        assert_eq!(after.judge(&"a", &applied, None, &both), Verdict::Collision);
        // Judged with no window at all, submitted once one opened: captured in it, so that
        // apply writing over it collides.
        let mut unseen = WindowEdits::default();
        assert_eq!(unseen.judge(&"a", &create, None, &[]), Verdict::Edit);
        unseen.submitted(&"a", &[open(101)]);
        assert_eq!(
            unseen.judge(&"a", &applied, None, &[open(101)]),
            Verdict::Collision
        );
        // A delete submitted before the window opened is in its commit too.
        let mut deleted = WindowEdits::default();
        assert_eq!(deleted.judge_delete(&"d", &first, None), Verdict::Edit);
        deleted.submitted(&"d", &first);
        assert_eq!(deleted.judge(&"d", &applied, None, &both), Verdict::Landing);
    }

    #[test]
    fn the_applier_writing_over_an_edit_seen_in_the_window_collides() {
        let w = [open(100)];
        let mut edits = WindowEdits::default();
        // The edit, in the window's second, then the forced apply that took its fields over:
        // the edit's entry is gone from the apply's event, and only the captured edit tells.
        let edit = writes(&[("backflow-applier", 90), ("kubectl-edit", 100)]);
        assert_eq!(edits.judge(&"a", &edit, None, &w), Verdict::Edit);
        let over = writes(&[("backflow-applier", 100)]);
        assert_eq!(edits.judge(&"a", &over, None, &w), Verdict::Collision);
        // The applier writes over it again in the same window (a stamp): withheld, asked once.
        assert_eq!(edits.judge(&"a", &over, None, &w), Verdict::OverCollided);
        // Another object, never edited: a landing.
        assert_eq!(edits.judge(&"b", &over, None, &w), Verdict::Landing);
        // An edit made before the flush whose event arrives in the window (a slow watch) was
        // decided after the mark: an apply writing over it collides too.
        let mut edits = WindowEdits::default();
        let late = writes(&[("kubectl-edit", 90)]);
        assert_eq!(edits.judge(&"d", &late, None, &w), Verdict::Edit);
        let over_late = writes(&[("backflow-applier", 101)]);
        assert_eq!(edits.judge(&"d", &over_late, None, &w), Verdict::Collision);
        // The Repair runs in a window of its own: its landing is a landing.
        let repair = [ended(100, 103), open(150)];
        let repaired = writes(&[("backflow-applier", 150)]);
        assert_eq!(
            edits.judge(&"a", &repaired, None, &repair),
            Verdict::Landing
        );
        // A window no longer kept takes its edits with it.
        assert_eq!(edits.judge(&"e", &edit, None, &w), Verdict::Edit);
        let next = [open(200)];
        let later = writes(&[("backflow-applier", 201)]);
        assert_eq!(edits.judge(&"e", &later, None, &next), Verdict::Landing);
    }

    /// An edit judged in one window and submitted after the next opened is in both; the
    /// applier's first write over it collides in the first. Its next write, which seconds
    /// cannot place, still finds the edit no write collided with in the second window: a
    /// Repair too many costs an apply, one too few loses the edit.
    #[test]
    fn an_edit_in_two_windows_collides_in_each() {
        let mut edits = WindowEdits::default();
        let edit = writes(&[("backflow-applier", 90), ("kubectl-edit", 100)]);
        assert_eq!(edits.judge(&"a", &edit, None, &[open(100)]), Verdict::Edit);
        let both = [ended(100, 101), open(101)];
        edits.submitted(&"a", &both);
        let over = writes(&[("backflow-applier", 101)]);
        assert_eq!(edits.judge(&"a", &over, None, &both), Verdict::Collision);
        assert_eq!(
            edits.judge(&"a", &over, None, &both),
            Verdict::Collision,
            "the second window's edit asks its own Repair"
        );
        assert_eq!(edits.judge(&"a", &over, None, &both), Verdict::OverCollided);
    }

    #[test]
    fn the_applier_deleting_is_a_landing_and_over_an_edit_in_the_window_a_collision() {
        let w = [open(100)];
        let id = w[0].id;
        let mut edits = WindowEdits::default();
        assert_eq!(edits.judge_delete(&"a", &w, Some(id)), Verdict::Landing);
        assert_eq!(
            edits.judge_delete(&"a", &[], None),
            Verdict::Edit,
            "not announced: somebody's"
        );
        let mut edits = WindowEdits::default();
        let edit = writes(&[("kubectl-edit", 90)]);
        assert_eq!(edits.judge(&"b", &edit, None, &w), Verdict::Edit);
        assert_eq!(edits.judge_delete(&"b", &w, Some(id)), Verdict::Collision);
        // Somebody's delete is mirrored, and the applier re-creating the object collides.
        assert_eq!(edits.judge_delete(&"c", &w, None), Verdict::Edit);
        let created = writes(&[("backflow-applier", 101)]);
        assert_eq!(edits.judge(&"c", &created, None, &w), Verdict::Collision);
        assert_eq!(
            edits.judge(&"d", &created, None, &w),
            Verdict::Landing,
            "nobody deleted d"
        );
    }

    #[test]
    fn a_history_keeps_recent_windows_and_hands_each_prune_out_once() {
        let s = |secs: u128| secs * NANOS;
        let mut h = WindowHistory::default();
        h.note_prune("x");
        assert_eq!(h.take_prune(&"x"), None, "no window");
        h.open(s(100));
        h.note_prune("x");
        h.close(s(103));
        h.note_prune("y");
        assert_eq!(h.take_prune(&"y"), None, "its operation ended");
        h.open(s(110));
        let spans = h.spans(s(111));
        assert_eq!(spans.len(), 2);
        assert_eq!(
            (spans[0].since, spans[0].until, spans[0].open),
            (100, Some(103), false)
        );
        assert_eq!(
            (spans[1].since, spans[1].until, spans[1].open),
            (110, None, true)
        );
        assert_eq!(
            h.take_prune(&"x"),
            Some(s(100)),
            "a prune of the earlier window"
        );
        assert_eq!(h.take_prune(&"x"), None, "used up");
        h.close(s(112));
        assert!(
            h.spans(s(111)).last().is_some_and(|w| w.open),
            "within the grace"
        );
        assert!(!h.spans(s(112)).last().is_some_and(|w| w.open));
        for at in 0..20 {
            h.open(s(200 + at));
        }
        assert_eq!(h.spans(s(300)).len(), WindowHistory::<&str>::KEPT);
        h.open(s(400));
        h.open(s(401));
        let spans = h.spans(s(402));
        let before_last = spans[spans.len() - 2];
        assert_eq!(
            before_last.until,
            Some(401),
            "a window still open ends at the next"
        );
    }

    #[test]
    fn a_window_stays_open_for_the_grace_after_its_operation_ended() {
        let mut history: WindowHistory<String> = WindowHistory::default();
        history.open(100 * NANOS);
        let ended = 105 * NANOS;
        history.ended(ended);
        let grace = APPLY_WINDOW_GRACE.as_nanos();
        let during = history.spans(ended + grace - 1);
        assert!(during.last().is_some_and(|w| w.open), "{during:?}");
        let after = history.spans(ended + grace + 1);
        assert!(after.last().is_some_and(|w| !w.open), "{after:?}");
    }

    #[test]
    fn a_tie_with_an_entry_seen_before_looks_like_the_appliers_write() {
        // Created by a person in the flush's second (that event came before), then applied in
        // the same second: still an edit to the window (a tie), but it looks like the applier's.
        let applied = writes(&[
            ("kubectl-client-side-apply", 100),
            ("argocd-controller", 100),
        ]);
        assert_eq!(
            WindowEdits::default().judge(&"a", &applied, None, &[open(100)]),
            Verdict::Edit
        );
        assert!(applied.looks_like_applier(Some(100)));
        assert!(
            !applied.looks_like_applier(None),
            "never seen: may be the person's"
        );
        assert!(
            !applied.looks_like_applier(Some(90)),
            "the person's entry is new"
        );
        let edited = writes(&[("kubectl-edit", 101)]);
        assert!(!edited.looks_like_applier(Some(100)));
        let stale = writes(&[("argocd-controller", 90), ("kubectl-edit", 100)]);
        assert!(
            !stale.looks_like_applier(Some(100)),
            "the applier's entry is older than the newest second"
        );
    }

    #[test]
    fn an_apply_over_an_edit_in_a_second_other_managers_share_collides() {
        // Seen in a Flux claim test: created, edited and force-applied over, all in second 100;
        // the apply took the editor's field (its entry is gone), the creator's entry ties.
        let mut edits = WindowEdits::default();
        let window = [open(100)];
        let created = writes(&[("kubectl-client-side-apply", 100)]);
        let edit = writes(&[("kubectl-client-side-apply", 100), ("kubectl-patch", 100)]);
        let edit_seen = Some(created.writers());
        assert_eq!(edits.judge(&"a", &edit, edit_seen, &window), Verdict::Edit);
        let applied = writes(&[
            ("kubectl-client-side-apply", 100),
            ("kustomize-controller", 100),
        ]);
        assert_eq!(
            edits.judge(&"a", &applied, Some(edit.writers()), &window),
            Verdict::Collision,
            "the applier's entry is new since the edit's event: its write, over the edit"
        );
        // The person editing again in that second, after the apply: their write, mirrored.
        let again = writes(&[
            ("kubectl-client-side-apply", 100),
            ("kustomize-controller", 100),
            ("kubectl-patch", 100),
        ]);
        assert_eq!(
            edits.judge(&"a", &again, Some(applied.writers()), &window),
            Verdict::Edit
        );
        // The apply's write arriving unjudged (its value unchanged) before the edit: the edit
        // is compared with that event, not with the one before it.
        let mut edits = WindowEdits::default();
        let stamped = writes(&[("argocd-controller", 100)]);
        let edited = writes(&[("argocd-controller", 100), ("kubectl-patch", 100)]);
        assert_eq!(
            edits.judge(&"b", &edited, Some(stamped.writers()), &window),
            Verdict::Edit
        );
        assert!(
            !edited.applier_wrote_since(stamped.writers()),
            "the applier's entry is as the previous event dated it"
        );
        // Another manager's entry newer than before: not the applier's write alone.
        let mixed = writes(&[("kubectl-edit", 101), ("kustomize-controller", 101)]);
        assert!(!mixed.applier_wrote_since(edit.writers()));
        // Without the previous event, or with no edit in the window, a tie stays an edit.
        let mut edits = WindowEdits::default();
        assert_eq!(edits.judge(&"c", &edit, None, &window), Verdict::Edit);
        assert_eq!(edits.judge(&"c", &applied, None, &window), Verdict::Edit);
        assert_eq!(
            WindowEdits::default().judge(&"d", &applied, Some(edit.writers()), &window),
            Verdict::Landing,
            "the applier's write, no edit seen in its window: the apply landing"
        );
    }

    #[test]
    fn argo_cds_client_side_apply_is_an_appliers_write() {
        // Argo CD applies client-side by default, recorded under its controller's process name.
        let applied = writes(&[("argocd-application-controller", 101)]);
        assert_eq!(
            judge(&[("argocd-application-controller", 101)], &[open(100)]),
            Verdict::Landing
        );
        assert!(applied.only_by_at(APPLIER_MANAGERS, 101));
    }

    #[test]
    fn writes_answer_by_second_and_manager() {
        let w = writes(&[("a", 5), ("b", 7), ("c", 7)]);
        assert_eq!(w.newest(), Some(7));
        assert_eq!(
            w.newest_manager(),
            Some("c"),
            "of the ties, the last listed"
        );
        assert!(w.only_by_at(&["b", "c"], 7));
        assert!(!w.only_by_at(&["b"], 7));
        assert!(w.newest_only_by(&["b", "c"]));
        assert!(
            !w.newest_only_by(&["a", "b"]),
            "c wrote in the newest second too"
        );
        assert!(!Writes::default().newest_only_by(&["a"]));
        assert_eq!(w.newest_other(&["c"]), Some(7));
        assert_eq!(w.newest_other(&["a", "b", "c"]), None);
        assert_eq!(Writes::default().newest_manager(), None);
    }
}
