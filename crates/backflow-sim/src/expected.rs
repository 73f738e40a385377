//! What each object may end with, field by field (invariants 2 to 4).
//!
//! The world's objects hold one value, or (`Variant::TwoFields`) two fields a person and a push
//! each change one of at a time. Each field follows the last edit on each side on its own: an
//! API edit of `x` and a push of `y` made while the edit was on its way must both stand (the
//! replay lays the edit onto the push field by field); only an edit and a push of the same
//! field race. A tombstone (the object does not exist) is every field's value.

use std::collections::BTreeMap;

use backflow_branch::model::ModelRemote;

use crate::live::{absent, field_of, same};

/// What one field of one object may end with, following the last edit on each side.
///
/// An API edit (or a snapshot of the live state) wins over a push made after Git held it; over
/// a push made while it was still on its way, either may win (the API side wins the replay
/// unless its intent was dropped as unchanged, judged against a tip read after the edit, which
/// depends on when the push landed), so both are accepted — but nothing older ever is. Whether
/// Git held it is read from the remote's history, not from the branch worker.
#[derive(Debug, Clone)]
struct FieldExpected {
    /// The values the object may end with.
    candidates: Vec<String>,
    /// The newest API edit, and its submission once the mirror made it.
    person: Option<(String, Option<Submitted>)>,
    /// Any value will do, as long as both sides agree: a person's delete that never reached a
    /// branch worker (its event died with the process or the stream) and that the next list's
    /// sweep does not remove (the commit it reads against did not hold the object); until the
    /// person's next edit (older edits still on their way may win over later pushes). And a
    /// field a write that makes the object exist again leaves as it is (see
    /// [`Expected::person_edits`]).
    any: bool,
}

impl FieldExpected {
    fn new(value: String) -> Self {
        Self {
            candidates: vec![value],
            person: None,
            any: false,
        }
    }

    fn person_edits(&mut self, value: String) {
        self.candidates = vec![value.clone()];
        self.person = Some((value, None));
        self.any = false;
    }

    /// The watch events on their way died (with the process, or with the streams a divergence
    /// starts again): a person's delete never handed to the branch worker is known to nobody
    /// now (the live store keeps no trace of it), and the object may come back.
    fn unseen(&mut self) {
        if let Some((value, None)) = &self.person
            && value.starts_with('-')
        {
            self.any = true;
        }
    }

    /// The mirror submitted `value`, named `tag` in its commit.
    fn submitted(&mut self, value: &str, tag: &str) {
        if let Some(p) = self.person.as_mut().filter(|p| p.0 == value) {
            // Submitted again (a snapshot after a restart or a divergence): any commit naming
            // one of its submissions carries it.
            p.1.get_or_insert_with(|| Submitted { tags: Vec::new() })
                .tags
                .push(tag.to_string());
        }
    }

    /// The newest API edit's value, if a person edited the object.
    fn edit(&self) -> Option<&str> {
        self.person.as_ref().map(|(value, _)| value.as_str())
    }

    /// Whether the newest API edit is in a commit the branch holds.
    fn edit_in_git(&self, remote: &ModelRemote) -> bool {
        self.person
            .as_ref()
            .and_then(|(_, submitted)| submitted.as_ref())
            .is_some_and(|s| s.pushed(remote))
    }

    /// Somebody force-pushed the branch to a commit holding `value` (`was_in_git`: whether the
    /// newest API edit was in the branch before). When that dropped the edit's commit, the
    /// worker publishes the edit again — as a replay when it did not know the commit landed,
    /// or in the resync after it saw its commits go — so the edit may win again.
    fn force_pushed(&mut self, value: String, was_in_git: bool, remote: &ModelRemote) {
        self.foreign_push(value, remote);
        if was_in_git
            && !self.edit_in_git(remote)
            && let Some((edit, _)) = &self.person
        {
            self.candidates.push(edit.clone());
        }
    }

    /// An applier wrote over the newest API edit, and the streams listed again before the edit
    /// was repaired (a restart, a divergence): the edit may be lost (a known gap, see
    /// docs/simulation.md), and any value will do as long as both sides agree.
    fn lost_in_a_list(&mut self) {
        self.any = true;
    }

    /// A held applier wrote `value` over the newest API edit while backflow was down, before
    /// the edit reached Git: the edit is lost as it would be without backflow.
    /// `in_git`: what the branch holds of the object now.
    fn lost_to_applier(&mut self, value: String, in_git: String) {
        if let Some((edit, _)) = self.person.take() {
            self.candidates.retain(|c| *c != edit);
        }
        // What Git holds stands against the applier's older value where the start-up snapshot
        // reads the object as unchanged since the live side last held a commit.
        self.candidates.push(value);
        self.candidates.push(in_git);
    }

    /// Whether no API edit of this field is on its way to Git.
    fn settled(&self, remote: &ModelRemote) -> bool {
        match &self.person {
            None => true,
            Some((_, submitted)) => submitted.as_ref().is_some_and(|s| s.pushed(remote)),
        }
    }

    /// Somebody pushed `value` (already on `remote`).
    fn foreign_push(&mut self, value: String, remote: &ModelRemote) {
        if self.settled(remote) {
            self.candidates = vec![value];
        } else {
            self.candidates.push(value);
        }
    }
}

/// An API edit's submission to the branch worker.
#[derive(Debug, Clone)]
struct Submitted {
    /// The `Changed-by:` names of its intents (the mirror's submission, and the snapshots
    /// that carried it again).
    tags: Vec<String>,
}

impl Submitted {
    /// Whether the branch holds a commit that carries it (names it in its `Changed-by:`). An
    /// edit Git held already changes no file: when it counts as published is the worker's
    /// business, which the remote's history does not show, so until then either side may win.
    fn pushed(&self, remote: &ModelRemote) -> bool {
        remote.history().iter().any(|c| {
            remote
                .commits
                .get(c)
                .is_some_and(|m| self.tags.iter().any(|t| m.changed_by.contains(t)))
        })
    }
}

/// How a write touches a field ([`Expected::touched`]).
enum Touch {
    /// It holds another value.
    Changed,
    /// It holds the same value, and makes the object exist.
    Revived,
}

/// Whether each field's newest API edit is in a commit the branch holds.
pub(crate) type EditsInGit = BTreeMap<&'static str, bool>;

/// What one object may end with: each of its fields' [`FieldExpected`].
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    fields: BTreeMap<&'static str, FieldExpected>,
    /// The whole object of the newest API edit: an edit on its way writes it back whole over
    /// a push that removed the file, every field as the live side held it.
    edit: Option<String>,
}

impl Expected {
    /// An object that holds `value` on both sides, of `fields`.
    pub(crate) fn new(value: &str, fields: &'static [&'static str]) -> Self {
        let fields = (fields.iter())
            .map(|f| (*f, FieldExpected::new(field_of(value, f))))
            .collect();
        Self { fields, edit: None }
    }

    /// The fields a write of `value` over `previous` touches, and how: those it holds
    /// otherwise (every field, without `previous`) it changes; and as an object exists or not
    /// as a whole, a write that makes it exist revives every other field that may end absent
    /// or that a person deleted last (an edit of `y` of an object an applier created again
    /// over a delete keeps it, with `x` as it is now).
    fn touched<'a>(
        &'a mut self,
        value: &'a str,
        previous: Option<&'a str>,
    ) -> impl Iterator<Item = (&'static str, &'a mut FieldExpected, Touch)> + 'a {
        let exists = !absent(value);
        self.fields.iter_mut().filter_map(move |(f, e)| {
            let unchanged = previous.is_some_and(|p| field_of(p, f) == field_of(value, f));
            let revived =
                exists && (e.candidates.iter().any(|c| absent(c)) || e.edit().is_some_and(absent));
            match (unchanged, revived) {
                (false, _) => Some((*f, e, Touch::Changed)),
                (true, true) => Some((*f, e, Touch::Revived)),
                (true, false) => None,
            }
        })
    }

    /// A person wrote `value` over `previous` through the API (or a snapshot made the live
    /// side the truth: `previous` is `None`). Only the fields the write changed are edits; a
    /// field it revived is on its way as it is now, and may end with any value both sides
    /// agree on.
    pub(crate) fn person_edits(&mut self, value: &str, previous: Option<&str>) {
        for (f, e, touch) in self.touched(value, previous) {
            match touch {
                Touch::Changed => e.person_edits(field_of(value, f)),
                Touch::Revived => {
                    // Written whole when the mirror had no value to read it against; else the
                    // delete, the applier's re-creation and this write may go out in one window
                    // as no change of the field, over whatever Git gained since the window's
                    // first change — which the oracle cannot tell from outside: any value will
                    // do, as long as both sides agree, until the field's next edit.
                    e.person_edits(field_of(value, f));
                    e.any = true;
                }
            }
        }
        self.edit = Some(value.to_string());
    }

    /// Somebody pushed `value` over `previous` (the file before the push; already on
    /// `remote`). Only the fields the push changed are Git-side changes.
    pub(crate) fn foreign_push(
        &mut self,
        value: &str,
        previous: Option<&str>,
        remote: &ModelRemote,
    ) {
        // A removal races an edit of any field on its way: if the edit wins, it writes the
        // object back whole, each field as the edit's object holds it.
        let unsettled = self.fields.values().any(|e| !e.settled(remote));
        let written_back = (absent(value) && unsettled)
            .then(|| self.edit.clone())
            .flatten();
        for (f, e, _) in self.touched(value, previous) {
            e.foreign_push(field_of(value, f), remote);
        }
        if let Some(edit) = written_back {
            self.also(&edit);
        }
    }

    /// Somebody force-pushed the branch to a commit holding `value`; `was_in_git`: which
    /// fields' newest API edits the branch held before.
    pub(crate) fn force_pushed(
        &mut self,
        value: &str,
        was_in_git: &EditsInGit,
        remote: &ModelRemote,
    ) {
        for (f, e) in &mut self.fields {
            let in_git = was_in_git.get(f).copied().unwrap_or(false);
            e.force_pushed(field_of(value, f), in_git, remote);
        }
    }

    /// Which fields' newest API edits are in a commit the branch holds.
    pub(crate) fn edits_in_git(&self, remote: &ModelRemote) -> EditsInGit {
        (self.fields.iter())
            .map(|(f, e)| (*f, e.edit_in_git(remote)))
            .collect()
    }

    /// Whether every field's newest API edit is in a commit the branch holds.
    pub(crate) fn edit_in_git(&self, remote: &ModelRemote) -> bool {
        self.fields.values().all(|e| e.edit_in_git(remote))
    }

    /// Whether a field's newest API edit, not in Git yet, is what `value` holds of it.
    pub(crate) fn pending_edit_in(&self, value: &str, remote: &ModelRemote) -> bool {
        self.fields.iter().any(|(f, e)| {
            !e.edit_in_git(remote) && e.edit().is_some_and(|edit| edit == field_of(value, f))
        })
    }

    /// The mirror submitted `value`, named `tag` in its commit.
    pub(crate) fn submitted(&mut self, value: &str, tag: &str) {
        for (f, e) in &mut self.fields {
            e.submitted(&field_of(value, f), tag);
        }
    }

    /// See [`FieldExpected::unseen`].
    pub(crate) fn unseen(&mut self) {
        self.fields.values_mut().for_each(FieldExpected::unseen);
    }

    /// See [`FieldExpected::lost_in_a_list`].
    pub(crate) fn lost_in_a_list(&mut self) {
        self.fields
            .values_mut()
            .for_each(FieldExpected::lost_in_a_list);
    }

    /// A held applier wrote `value` over the newest API edits while backflow was down: the
    /// fields whose edit had not reached Git (`in_git`: what the branch holds of the object
    /// now) are lost as they would be without backflow.
    pub(crate) fn lost_to_applier(&mut self, value: &str, in_git: &str, remote: &ModelRemote) {
        for (f, e) in &mut self.fields {
            if !e.edit_in_git(remote) {
                e.lost_to_applier(field_of(value, f), field_of(in_git, f));
            }
        }
    }

    /// The object may also end with `value` (each field with its value in it).
    pub(crate) fn also(&mut self, value: &str) {
        for (f, e) in &mut self.fields {
            e.candidates.push(field_of(value, f));
        }
    }

    /// The object may also end with anything `before` allowed.
    pub(crate) fn also_from(&mut self, before: &Expected) {
        for (f, e) in &mut self.fields {
            if let Some(b) = before.fields.get(f) {
                e.candidates.extend(b.candidates.iter().cloned());
            }
        }
    }

    /// What is wrong with ending as `live`, if anything.
    pub(crate) fn unmet(&self, live: &str) -> Option<String> {
        let wrong: Vec<String> = (self.fields.iter())
            .filter(|(f, e)| !e.any && !e.candidates.iter().any(|c| same(c, &field_of(live, f))))
            .map(|(f, e)| format!("{f} one of {:?}", e.candidates))
            .collect();
        (!wrong.is_empty()).then(|| format!("expected {}", wrong.join(", ")))
    }
}
