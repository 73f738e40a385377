//! Scripted schedules: the world's actions named rather than drawn, so a case someone found (a
//! "No edit lost" case, a seed's trace cut to what matters) stays a regression test that reads
//! as its story and does not move when the random schedules change. Nothing is drawn in a
//! scripted world: no fault, stall or failed apply happens unless an action names it.

use backflow_branch::CoreConfig;
use backflow_branch::model::Shell;

use super::{NAMES, Schedule, Variant, World, absent};
use crate::check::Violation;

/// One thing that happens in a scripted world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The mirror's initial list returns, and its snapshot is submitted.
    ListReturns,
    /// The claim hears the streams stream: its gate opens.
    GateOpens,
    /// The fetch, build or push in flight is answered.
    Answer,
    /// The I/O in flight fails so.
    Fail(IoFault),
    /// A person sets the object to a new value through the API.
    Edit(&'static str),
    /// A person sets one field of the object (`x` or `y`, `Variant::TwoFields`) through the API.
    EditField(&'static str, &'static str),
    /// A person deletes the object through the API.
    Delete(&'static str),
    /// Somebody pushes a change of the object's file.
    Push(&'static str),
    /// Somebody pushes a change of one field of the object's file (`Variant::TwoFields`).
    PushField(&'static str, &'static str),
    /// Somebody pushes the removal of the object's file.
    PushRemoval(&'static str),
    /// The oldest watch event reaches the mirror.
    Deliver,
    /// A push webhook arrives.
    Webhook,
    /// Somebody deletes the branch.
    DeleteBranch,
    /// The applier finishes what it was asked (if its reconcile is not over, time moves on).
    ApplierFinishes,
    /// Time moves to the next wake-up (a quarter of a second at most).
    Tick,
    /// The process is killed and starts again; an I/O in flight dies unanswered.
    Restart,
    /// The process is killed between its push landing and the push's answer.
    RestartAfterPushLands,
    /// The process is killed while backflow's own applier carries out its operation, after
    /// it wrote this many of the objects it changes (an apply cut short).
    RestartDuringApply(usize),
    /// Everything in flight runs out (events delivered, I/O answered, applies finished) until
    /// the system is quiet; the world goes on afterwards.
    Settle,
}

/// How an I/O fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFault {
    /// A fetch or a build fails; a push never reaches the remote.
    Fails,
    /// A push lands and its answer is lost.
    AnswerLost,
    /// A hook refuses a push although the branch did not move.
    HookRefuses,
}

impl World {
    /// A scripted world of `variant`: the folder holds `a`, `b`, `c` = `v0` live, the
    /// provider's timing is the default, a held applier is Flux's, and nothing happens but the
    /// actions given to [`World::act`].
    #[must_use]
    pub fn scripted(variant: Variant) -> Self {
        let mut world = Self::new(0, variant);
        world.schedule = Schedule::Scripted;
        // A scripted held applier is Flux's (the drawn schedules play Argo CD's too).
        world.held_manager = super::HELD_MANAGERS[0];
        world.held_resource = super::HeldResource::of(world.held_manager);
        let config = CoreConfig::default();
        let shell = std::mem::replace(&mut world.branch, Shell::new(config.clone()));
        world.branch = shell.restart(config);
        world
    }

    /// Carries out `action`, to its end.
    ///
    /// # Errors
    /// [`Action::Settle`] on a system that never gets quiet.
    pub fn act(&mut self, action: Action) -> Result<(), Violation> {
        self.log(format!("[script] {action:?}"));
        match action {
            Action::ListReturns if self.listing => self.list(),
            Action::GateOpens if self.gate_opening => self.open_gate(),
            Action::ListReturns | Action::GateOpens => {}
            Action::Answer => self.answer_io(None),
            Action::Fail(fault) => self.answer_io(Some(fault)),
            Action::Edit(name) => self.person_writes(object(name), false),
            Action::Delete(name) if !absent(&self.live[name].value) => {
                self.person_writes(object(name), true);
            }
            Action::Delete(_) => {}
            Action::Push(name) => self.git_writes(object(name), false),
            Action::EditField(name, field) => {
                self.next_field = Some(self.field(field));
                self.person_writes(object(name), false);
            }
            Action::PushField(name, field) => {
                self.next_field = Some(self.field(field));
                self.git_writes(object(name), false);
            }
            Action::PushRemoval(name) => self.git_writes(object(name), true),
            Action::Deliver => self.deliver(),
            Action::Webhook => self.webhook(),
            Action::DeleteBranch => self.rewrite_branch(None),
            Action::ApplierFinishes => self.finish_apply(),
            Action::Tick => self.tick(),
            Action::Restart => self.restart(false),
            Action::RestartAfterPushLands => self.restart(true),
            Action::RestartDuringApply(written) => {
                self.cut_short(written);
                self.restart(false);
            }
            Action::Settle => {
                let stopping = std::mem::replace(&mut self.quiescing, true);
                let settled = self.run_out();
                self.quiescing = stopping;
                return settled;
            }
        }
        Ok(())
    }
}

impl World {
    /// One of the fields of the world's objects.
    ///
    /// # Panics
    /// When `field` is none of them: a script names `x` or `y` of a two-field world.
    fn field(&self, field: &str) -> &'static str {
        let known = self.fields.iter().copied().find(|f| *f == field);
        known.unwrap_or_else(|| panic!("the world's objects have {:?}, not {field}", self.fields))
    }
}

/// The name of one of the folder's objects.
///
/// # Panics
/// When `name` is none of them: a script names `a`, `b` or `c`.
fn object(name: &str) -> String {
    assert!(
        NAMES.contains(&name),
        "the world holds a, b and c, not {name}"
    );
    name.to_string()
}
