//! Catch-ups: each watch stream of a target asked to decide every object its scope holds now,
//! even one whose watch event is still on its way. Taken before a flush whose commit an
//! applier then writes to the live side, so the applier never writes over an edit no stream
//! decided yet (were the process to die before that edit's event arrived, nothing would
//! remember it); and before a `CommitRequest`'s commit.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::{StreamSpec, TargetRef};

/// A stream answers a catch-up on it once every object its scope held when asked is decided.
pub type Barrier = oneshot::Sender<()>;

/// Where each running stream takes its catch-ups.
#[derive(Debug, Default)]
pub struct CatchUps(Mutex<BTreeMap<StreamSpec, mpsc::Sender<Barrier>>>);

/// How a catch-up went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaughtUp {
    /// Streams that answered.
    pub answered: usize,
    /// Streams that did not answer in time (or stopped meanwhile).
    pub unanswered: usize,
}

impl CatchUps {
    fn streams(&self) -> std::sync::MutexGuard<'_, BTreeMap<StreamSpec, mpsc::Sender<Barrier>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `spec` takes its catch-ups on `barriers`.
    pub fn register(&self, spec: &StreamSpec, barriers: mpsc::Sender<Barrier>) {
        self.streams().insert(spec.clone(), barriers);
    }

    /// `spec` stopped.
    pub fn forget(&self, spec: &StreamSpec) {
        self.streams().remove(spec);
    }

    /// Asks every stream of `targets` to catch up, all at once, and waits for their answers,
    /// each for at most `limit`.
    pub async fn of(&self, targets: &[TargetRef], limit: Duration) -> CaughtUp {
        let asked: Vec<mpsc::Sender<Barrier>> = self
            .streams()
            .iter()
            .filter(|(spec, _)| targets.contains(&spec.target))
            .map(|(_, barriers)| barriers.clone())
            .collect();
        // The send waits too while a stream's queue is full (catch-ups it has not answered):
        // within the same limit, so a stuck stream never holds a flush for good.
        let answers = asked.into_iter().map(|barriers| async move {
            let (done, answer) = oneshot::channel();
            let asked = async { barriers.send(done).await.is_ok() && answer.await.is_ok() };
            matches!(tokio::time::timeout(limit, asked).await, Ok(true))
        });
        let mut caught = CaughtUp::default();
        for answered in futures::future::join_all(answers).await {
            if answered {
                caught.answered += 1;
            } else {
                caught.unanswered += 1;
            }
        }
        caught
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServedType;

    fn spec(target: &str) -> StreamSpec {
        StreamSpec {
            target: ("ns".into(), target.into()),
            served: ServedType {
                group: String::new(),
                version: "v1".into(),
                plural: "configmaps".into(),
                kind: "ConfigMap".into(),
                namespaced: true,
                preferred: true,
            },
            namespace: None,
        }
    }

    #[tokio::test]
    async fn a_catch_up_asks_the_targets_streams_only_and_counts_the_silent_ones() {
        let catch_ups = CatchUps::default();
        let (answering, mut asked) = mpsc::channel::<Barrier>(1);
        let (silent, mut ignored) = mpsc::channel::<Barrier>(1);
        let (other, mut never) = mpsc::channel::<Barrier>(1);
        catch_ups.register(&spec("a"), answering);
        let mut silent_spec = spec("a");
        silent_spec.namespace = Some("web".into());
        catch_ups.register(&silent_spec, silent);
        catch_ups.register(&spec("b"), other);
        tokio::spawn(async move {
            while let Some(done) = asked.recv().await {
                let _ = done.send(());
            }
        });
        tokio::spawn(async move {
            // Takes the barrier and never answers (a stream stuck in a list).
            let _held = ignored.recv().await;
            std::future::pending::<()>().await;
        });
        let caught = catch_ups
            .of(&[("ns".into(), "a".into())], Duration::from_millis(50))
            .await;
        assert_eq!(
            caught,
            CaughtUp {
                answered: 1,
                unanswered: 1
            }
        );
        assert!(
            never.try_recv().is_err(),
            "another target's stream is not asked"
        );
        catch_ups.forget(&silent_spec);
        let caught = catch_ups
            .of(&[("ns".into(), "a".into())], Duration::from_millis(50))
            .await;
        assert_eq!(caught.unanswered, 0);
    }
}
