//! From a verified push to the branch workers it concerns: match the delivery's repositories
//! and branch against every branch a worker writes, drop redeliveries, wake the rest.

use std::collections::{BTreeMap, VecDeque};

use super::delivery::{PushDelivery, PushedRef, Revision};
use super::repository::RepositoryId;

/// A branch some worker writes, as its `GitProvider` names the repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WrittenBranch {
    /// The provider's `spec.url`.
    pub url: String,
    /// The branch.
    pub branch: String,
}

/// The branch workers a delivery can wake; implemented over the mirror's workers.
pub trait PushTargets: Send + Sync + 'static {
    /// Every branch a worker writes now.
    fn branches(&self) -> Vec<WrittenBranch>;
    /// A delivery named `branch`: stamp its `lastPushNoticeAt` and, unless the delivery is a
    /// redelivery of one already acted on, tell its worker to read the remote.
    fn notice(&self, branch: &WrittenBranch, wake: bool);
}

/// What became of a verified push delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// These branches' workers were told to look.
    Woke(Vec<WrittenBranch>),
    /// Every branch it names was already told about this exact push.
    Duplicate(Vec<WrittenBranch>),
    /// No worker writes the repository and branch it names.
    NoMatch,
    /// It moved a tag or another ref that is not a branch.
    NotABranch,
}

/// The branches a delivery names, among those written.
#[must_use]
pub fn matching(delivery: &PushDelivery, written: &[WrittenBranch]) -> Vec<WrittenBranch> {
    let branch = match &delivery.pushed_ref {
        PushedRef::Branch(b) => Some(b.as_str()),
        PushedRef::Unnamed => None,
        PushedRef::Other(_) => return Vec::new(),
    };
    let mut found: Vec<WrittenBranch> = written
        .iter()
        .filter(|w| branch.is_none_or(|b| b == w.branch))
        .filter(|w| {
            RepositoryId::parse(&w.url).is_some_and(|id| delivery.repositories.contains(&id))
        })
        .cloned()
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The last tip each (repository, branch) was woken for: a redelivery of it (hosts reuse the
/// delivery id, so only the content tells) wakes nobody. Only the newest tip per branch is
/// kept, so a branch that moves away and back is woken again. Bounded: the oldest entries go
/// first.
#[derive(Debug)]
pub struct RecentPushes {
    last: BTreeMap<WrittenBranch, Revision>,
    order: VecDeque<WrittenBranch>,
    capacity: usize,
}

impl RecentPushes {
    /// Remembers at most `capacity` branches.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            last: BTreeMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records that `branch` was told about `after`; false if it already was (a redelivery).
    /// A push whose tip is unknown is never a redelivery.
    pub fn record(&mut self, branch: &WrittenBranch, after: &Revision) -> bool {
        if *after == Revision::Unknown {
            return true;
        }
        if self.last.get(branch) == Some(after) {
            return false;
        }
        if self.last.insert(branch.clone(), after.clone()).is_none() {
            self.order.push_back(branch.clone());
            while self.order.len() > self.capacity {
                if let Some(old) = self.order.pop_front() {
                    self.last.remove(&old);
                }
            }
        }
        true
    }
}

/// Matches `delivery`, wakes the workers of the branches it names (once per tip) and stamps
/// every one of them.
pub fn dispatch(
    delivery: &PushDelivery,
    targets: &dyn PushTargets,
    recent: &mut RecentPushes,
) -> Dispatch {
    if matches!(delivery.pushed_ref, PushedRef::Other(_)) {
        return Dispatch::NotABranch;
    }
    let matched = matching(delivery, &targets.branches());
    if matched.is_empty() {
        return Dispatch::NoMatch;
    }
    let mut woke = Vec::new();
    for branch in &matched {
        let wake = recent.record(branch, &delivery.after);
        targets.notice(branch, wake);
        if wake {
            woke.push(branch.clone());
        }
    }
    if woke.is_empty() {
        Dispatch::Duplicate(matched)
    } else {
        Dispatch::Woke(woke)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    const TIP: &str = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";
    const OTHER: &str = "1111111111111111111111111111111111111111";

    #[derive(Default)]
    struct Recorder {
        written: Vec<WrittenBranch>,
        notices: Mutex<Vec<(String, bool)>>,
    }

    impl PushTargets for Recorder {
        fn branches(&self) -> Vec<WrittenBranch> {
            self.written.clone()
        }
        fn notice(&self, branch: &WrittenBranch, wake: bool) {
            self.notices
                .lock()
                .unwrap()
                .push((format!("{}@{}", branch.url, branch.branch), wake));
        }
    }

    fn written(url: &str, branch: &str) -> WrittenBranch {
        WrittenBranch {
            url: url.into(),
            branch: branch.into(),
        }
    }

    fn push(urls: &[&str], pushed_ref: PushedRef, after: &str) -> PushDelivery {
        PushDelivery {
            repositories: urls.iter().filter_map(|u| RepositoryId::parse(u)).collect(),
            pushed_ref,
            after: Revision::Commit(after.into()),
        }
    }

    #[test]
    fn a_delivery_wakes_the_branch_of_the_repository_it_names_by_any_url() {
        let targets = Recorder {
            written: vec![
                written("git@github.com:org/repo.git", "main"),
                written("https://github.com/org/repo", "dev"),
                written("https://github.com/org/other", "main"),
            ],
            ..Recorder::default()
        };
        let mut recent = RecentPushes::new(16);
        let d = push(
            &["https://github.com/org/repo.git"],
            PushedRef::Branch("main".into()),
            TIP,
        );
        assert_eq!(
            dispatch(&d, &targets, &mut recent),
            Dispatch::Woke(vec![written("git@github.com:org/repo.git", "main")])
        );
        let again = dispatch(&d, &targets, &mut recent);
        assert!(
            matches!(again, Dispatch::Duplicate(_)),
            "a redelivery wakes nobody"
        );
        assert_eq!(
            targets.notices.lock().unwrap().clone(),
            vec![
                ("git@github.com:org/repo.git@main".to_string(), true),
                ("git@github.com:org/repo.git@main".to_string(), false),
            ],
            "both stamp lastPushNoticeAt"
        );
    }

    #[test]
    fn other_repositories_other_branches_and_tags_wake_nobody() {
        let targets = Recorder {
            written: vec![written("https://github.com/org/repo", "main")],
            ..Recorder::default()
        };
        let mut recent = RecentPushes::new(16);
        let elsewhere = push(
            &["https://github.com/org/fork"],
            PushedRef::Branch("main".into()),
            TIP,
        );
        assert_eq!(
            dispatch(&elsewhere, &targets, &mut recent),
            Dispatch::NoMatch
        );
        let branch = push(
            &["https://github.com/org/repo"],
            PushedRef::Branch("dev".into()),
            TIP,
        );
        assert_eq!(dispatch(&branch, &targets, &mut recent), Dispatch::NoMatch);
        let tag = push(
            &["https://github.com/org/repo"],
            PushedRef::Other("refs/tags/v1".into()),
            TIP,
        );
        assert_eq!(dispatch(&tag, &targets, &mut recent), Dispatch::NotABranch);
        assert!(targets.notices.lock().unwrap().is_empty());
    }

    #[test]
    fn an_unnamed_ref_wakes_every_branch_of_the_repository() {
        let targets = Recorder {
            written: vec![
                written("file:///srv/origin.git", "main"),
                written("file:///srv/origin.git", "dev"),
            ],
            ..Recorder::default()
        };
        let mut d = push(&["/srv/origin.git"], PushedRef::Unnamed, TIP);
        d.after = Revision::Unknown;
        let Dispatch::Woke(woke) = dispatch(&d, &targets, &mut RecentPushes::new(4)) else {
            panic!("woke nobody");
        };
        assert_eq!(woke.len(), 2);
    }

    #[test]
    fn a_branch_that_moves_away_and_back_is_woken_again_and_memory_is_bounded() {
        let mut recent = RecentPushes::new(2);
        let main = written("u", "main");
        let tip = Revision::Commit(TIP.into());
        let other = Revision::Commit(OTHER.into());
        assert!(recent.record(&main, &tip));
        assert!(!recent.record(&main, &tip));
        assert!(recent.record(&main, &other));
        assert!(recent.record(&main, &tip), "back to an earlier tip is news");
        assert!(recent.record(&main, &Revision::Deleted));
        recent.record(&written("u", "a"), &tip);
        recent.record(&written("u", "b"), &tip);
        assert!(
            recent.record(&main, &Revision::Deleted),
            "evicted, so not a redelivery any more"
        );
        assert!(recent.last.len() <= 2);
    }
}
