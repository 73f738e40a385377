//! Commit message templates: single event, group, resync.
//!
//! Placeholders: `{verb}` (`update` or `delete`), `{object}` (the object's identity), `{target}`,
//! `{count}` (objects in the commit), `{targets}` (comma-separated) and `{objects}` (one line
//! per object). Unknown placeholders are left as they are.

use backflow_branch::{ObjectState, PendingWrite, WriteKind};

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
