//! Commit message templates: single event, group, resync.
//!
//! Placeholders: `{verb}` (`update` or `delete`), `{object}` (the object's identity), `{target}`,
//! `{count}` (objects in the commit), `{targets}` (comma-separated) and `{objects}` (one line
//! per object). Unknown placeholders are left as they are.

use std::collections::BTreeSet;
use std::sync::Arc;

use backflow_branch::{ChangedBy, ObjectState, PendingWrite, WriteKind};

use crate::repo::Identity;

/// The author email of a user's commits, unless configured: `{user}` is the user name.
pub const DEFAULT_AUTHOR_EMAIL: &str = "{user}@users.backflow.local";

/// The three message shapes of the branch worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTemplates {
    /// A commit holding one object.
    pub single: String,
    /// A commit holding several objects.
    pub group: String,
    /// A commit made by a resync of a target.
    pub resync: String,
}

impl Default for MessageTemplates {
    fn default() -> Self {
        Self {
            single: "backflow: {verb} {object} in {target}".into(),
            group: "backflow: {count} changes in {targets}\n\n{objects}".into(),
            resync: "backflow: resync {target} ({count} changes)\n\n{objects}".into(),
        }
    }
}

impl MessageTemplates {
    /// The message for a write, given the intents that actually went into its commit.
    #[must_use]
    pub fn render(&self, write: &PendingWrite) -> String {
        let template = match &write.kind {
            WriteKind::Save { message } => return message.clone(),
            WriteKind::Resync { .. } => &self.resync,
            WriteKind::Window if write.intents.len() == 1 => &self.single,
            WriteKind::Window => &self.group,
        };
        let verb = |s: &ObjectState| match s {
            ObjectState::Present(_) => "update",
            ObjectState::Absent => "delete",
            ObjectState::Sweep(_) => "prune",
            ObjectState::Bootstrap => "bootstrap",
        };
        let mut targets: Vec<&str> = write.intents.keys().map(|(t, _)| t.as_str()).collect();
        targets.dedup();
        let objects: Vec<String> = write
            .intents
            .values()
            .map(|(_, i)| format!("- {} {} in {}", verb(&i.state), i.key, i.target))
            .collect();
        let first = write.intents.values().next().map(|(_, i)| i);
        let target = match &write.kind {
            WriteKind::Resync { target } => target.clone(),
            _ => first.map(|i| i.target.clone()).unwrap_or_default(),
        };
        template
            .replace("{verb}", first.map_or("update", |i| verb(&i.state)))
            .replace(
                "{object}",
                &first.map(|i| i.key.to_string()).unwrap_or_default(),
            )
            .replace("{target}", &target)
            .replace("{count}", &write.intents.len().to_string())
            .replace("{targets}", &targets.join(", "))
            .replace("{objects}", &objects.join("\n"))
    }
}

/// The people a commit names: the user who authored it, the other users whose changes it
/// holds (`Co-authored-by:`), and the field managers that changed it when no user is known
/// (`Changed-by:`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommitPeople {
    /// The author, when a user is known; otherwise the configured author.
    pub author: Option<Identity>,
    /// The other users, in the order their first change was decided.
    pub co_authors: Vec<Identity>,
    /// Field managers, sorted.
    pub changed_by: Vec<String>,
}

impl CommitPeople {
    /// The people of the intents in `write`; user emails follow `email_template`.
    #[must_use]
    pub fn of(write: &PendingWrite, email_template: &str) -> Self {
        let mut intents: Vec<_> = write.intents.values().collect();
        intents.sort_by_key(|(seq, _)| *seq);
        let mut users: Vec<&Arc<str>> = Vec::new();
        let mut managers = BTreeSet::new();
        for (_, intent) in intents {
            match intent.attribution.as_ref().map(|a| &a.by) {
                Some(ChangedBy::User(u)) if !users.contains(&u) => users.push(u),
                Some(ChangedBy::Manager(m)) => {
                    managers.insert(m.to_string());
                }
                _ => {}
            }
        }
        let mut identities = users.into_iter().map(|u| user_identity(u, email_template));
        Self {
            author: identities.next(),
            co_authors: identities.collect(),
            changed_by: managers.into_iter().collect(),
        }
    }

    /// The trailers to end the message with (a blank line first), or nothing.
    #[must_use]
    pub fn trailers(&self) -> String {
        let lines: Vec<String> = self
            .co_authors
            .iter()
            .map(|p| format!("Co-authored-by: {} <{}>", p.name, p.email))
            .chain(self.changed_by.iter().map(|m| format!("Changed-by: {m}")))
            .collect();
        if lines.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", lines.join("\n"))
        }
    }
}

/// The identity commits give `user`: the name without what a signature cannot hold, the
/// email from `template` with the user's name made safe for an address.
#[must_use]
pub fn user_identity(user: &str, template: &str) -> Identity {
    let name: String = user
        .chars()
        .filter(|c| !matches!(c, '<' | '>') && !c.is_control())
        .collect();
    let local: String = user
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = if name.trim().is_empty() {
        local.clone()
    } else {
        name
    };
    Identity::new(name, template.replace("{user}", &local))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::{GroupResource, ObjectKey};
    use backflow_branch::{Intent, IntentSeq};
    use std::collections::BTreeMap;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("apps", "deployments"), "web", name)
    }

    fn write(intents: Vec<Intent>, kind: WriteKind) -> PendingWrite {
        let map: BTreeMap<_, _> = intents
            .into_iter()
            .enumerate()
            .map(|(n, i)| (i.slot(), (IntentSeq(n as u64 + 1), i)))
            .collect();
        PendingWrite::new(map, kind, IntentSeq(9))
    }

    #[test]
    fn users_author_and_co_author_and_managers_are_named_in_trailers() {
        use backflow_api::CommitAuthors;
        use backflow_branch::Attribution;
        let by = |b: ChangedBy| {
            Some(Attribution {
                by: b,
                commits: CommitAuthors::CoAuthored,
            })
        };
        let w = write(
            vec![
                Intent::delete("apps", key("a")).attributed(by(ChangedBy::User("bob".into()))),
                Intent::delete("apps", key("b")).attributed(by(ChangedBy::User(
                    "system:serviceaccount:ci:bot <x>".into(),
                ))),
                Intent::delete("apps", key("c")).attributed(by(ChangedBy::User("bob".into()))),
                Intent::delete("apps", key("d"))
                    .attributed(by(ChangedBy::Manager("kubectl-edit".into()))),
                Intent::delete("apps", key("e")),
            ],
            WriteKind::Window,
        );
        let people = CommitPeople::of(&w, DEFAULT_AUTHOR_EMAIL);
        assert_eq!(
            people.author,
            Some(Identity::new("bob", "bob@users.backflow.local"))
        );
        assert_eq!(
            people.trailers(),
            "\n\nCo-authored-by: system:serviceaccount:ci:bot x <system-serviceaccount-ci-bot--x-@users.backflow.local>\nChanged-by: kubectl-edit"
        );
        let nobody = write(vec![Intent::delete("apps", key("a"))], WriteKind::Window);
        assert_eq!(
            CommitPeople::of(&nobody, DEFAULT_AUTHOR_EMAIL),
            CommitPeople::default()
        );
        assert_eq!(CommitPeople::default().trailers(), "");
    }

    #[test]
    fn shapes() {
        let t = MessageTemplates::default();
        let one = write(vec![Intent::delete("apps", key("a"))], WriteKind::Window);
        assert_eq!(
            t.render(&one),
            "backflow: delete deployments.apps/web/a in apps"
        );
        let two = write(
            vec![
                Intent::put("apps", key("a"), serde_json::json!({})),
                Intent::delete("infra", key("b")),
            ],
            WriteKind::Window,
        );
        assert_eq!(
            t.render(&two),
            "backflow: 2 changes in apps, infra\n\n- update deployments.apps/web/a in apps\n- delete deployments.apps/web/b in infra"
        );
        let rs = write(
            vec![Intent::delete("apps", key("a"))],
            WriteKind::Resync {
                target: "apps".into(),
            },
        );
        assert!(
            t.render(&rs)
                .starts_with("backflow: resync apps (1 changes)")
        );
        let save = write(
            vec![],
            WriteKind::Save {
                message: "release 1.2".into(),
            },
        );
        assert_eq!(t.render(&save), "release 1.2");
    }
}
