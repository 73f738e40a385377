//! One suite, three drivers: the seed's scenarios, each written once and run against every
//! applier backflow holds — its own (`NativeClaim`), a Flux Kustomization (`FluxClaim`) and an
//! Argo CD Application (`ArgoCDClaim`), the latter two through their contract simulators
//! (`flux.rs`, `argo.rs`). The driver-specific rules (handing back, a human's override) are
//! tested beside each simulator.

use std::time::Duration;

use serde_json::Value;

use crate::apply::{assert_quiescent, one_way_default, wait_acting, wait_claim_operation};
use crate::common::*;
use crate::flux::SimulatedController;

/// Which applier holds the shop's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Driver {
    Native,
    Flux,
    Argo,
}

/// The shop's folder held by a driver's claim, and the simulated controller acting on it.
struct Held {
    _controller: Option<SimulatedController>,
}

const NATIVE_FOLDER: &str = r"apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {name: shop, namespace: backflow-system}
spec: {}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: shop, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: shop
  applierClaimRef: {kind: NativeClaim, name: shop}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {name: shop, namespace: backflow-system}
spec: {targetRef: {name: shop}, rules: [{apiGroups: [''], resources: [configmaps], sourceNamespace: shop}]}
";

impl Driver {
    /// A server whose shop folder (`ConfigMap` `shop/demo`, greeting hello) is coordinated by
    /// this driver's claim, the default folder mirroring one way; waits until the folder's
    /// target reports its claim ready.
    fn start(self, flags: &[&str]) -> (World, Held) {
        let w = World::start(flags);
        wait_acting(&w);
        let kubeconfig = w.dirs.data.join("kubeconfig");
        let controller = match self {
            Self::Native | Self::Flux => {
                one_way_default(&w);
                w.kubectl(&["create", "namespace", "shop"]);
                w.apply(&configmap("shop", "demo", &[("greeting", "hello")]));
                if self == Self::Native {
                    w.apply(NATIVE_FOLDER);
                    None
                } else {
                    crate::flux::hold_a_kustomization(&w, "main");
                    Some(SimulatedController::start(&kubeconfig, |c| async move {
                        crate::flux::reconcile_all(&c).await;
                    }))
                }
            }
            Self::Argo => {
                crate::argo::hold_an_application(&w);
                Some(SimulatedController::start(&kubeconfig, |c| async move {
                    crate::argo::reconcile_all(&c).await;
                }))
            }
        };
        let target = self.target();
        wait_for(
            &format!("GitTarget {target} to report its claim ready"),
            || format!("{:?}", w.target_condition(target, "ApplierClaimReady")),
            || {
                w.target_condition(target, "ApplierClaimReady")
                    .filter(|c| c.status == "True")
            },
        );
        w.wait_file(&self.path("demo"), |t| t.contains("hello"));
        (
            w,
            Held {
                _controller: controller,
            },
        )
    }

    fn target(self) -> &'static str {
        match self {
            Self::Native | Self::Argo => "shop",
            Self::Flux => "apps",
        }
    }

    /// Where the shop's `ConfigMap` `name` is in Git.
    fn path(self, name: &str) -> String {
        let folder = match self {
            Self::Native | Self::Argo => "shop",
            Self::Flux => "apps",
        };
        format!("{folder}/shop/configmaps/{name}.yaml")
    }

    /// The claim's status.
    fn claim(self, w: &World) -> Value {
        let (kind, name) = self.claim_name();
        w.get_json(&[kind, name, "-n", "backflow-system"])["status"].clone()
    }

    /// The claim's kind and name (in `backflow-system`).
    fn claim_name(self) -> (&'static str, &'static str) {
        match self {
            Self::Native => ("nativeclaim", "shop"),
            Self::Flux => ("fluxclaim", "flux"),
            Self::Argo => ("argocdclaim", "argo"),
        }
    }

    /// Sets the claim's `spec.suspend`: while true it asks nothing.
    fn suspend(self, w: &World, suspend: bool) {
        let (kind, name) = self.claim_name();
        let patch = format!(r#"{{"spec":{{"suspend":{suspend}}}}}"#);
        w.kubectl(&[
            "patch",
            kind,
            name,
            "-n",
            "backflow-system",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// What the applier marks on what it applied, which never reaches Git.
    fn stamp(self) -> &'static str {
        match self {
            Self::Native => "backflow.dev/applier",
            Self::Flux => "kustomize.toolkit.fluxcd.io",
            Self::Argo => "argocd.argoproj.io/tracking-id",
        }
    }

    /// Waits until the claim's operation applying `commit` (or a commit built on it) succeeded.
    fn wait_applied(self, w: &World, commit: &str) -> Value {
        wait_claim_operation(w, || self.claim(w), String::new, commit, "Succeeded")
    }
}

fn greeting(w: &World, name: &str) -> Option<String> {
    let out = w.kubectl_run(&["get", "configmap", name, "-n", "shop", "-o", "json"]);
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    v["data"]["greeting"].as_str().map(str::to_string)
}

fn wait_greeting(d: Driver, w: &World, name: &str, value: &str) {
    wait_for(
        &format!("shop/{name} to greet {value}"),
        || {
            let log = w.git(&[
                "log",
                "--format=%h %s",
                "-p",
                "-n",
                "8",
                "main",
                "--",
                "shop",
                "apps",
            ]);
            format!("{:?}\n{:#}\n{log}", greeting(w, name), d.claim(w))
        },
        || (greeting(w, name).as_deref() == Some(value)).then_some(()),
    );
}

fn set_greeting(w: &World, name: &str, value: &str) {
    let patch = format!(r#"{{"data":{{"greeting":"{value}"}}}}"#);
    w.kubectl(&[
        "patch",
        "configmap",
        name,
        "-n",
        "shop",
        "--type=merge",
        "-p",
        &patch,
    ]);
}

/// A push reaches the live side through the claim's applier, whose stamps never reach Git; a
/// live edit of what it applied reaches Git, and nothing applies it away.
fn a_push_reaches_the_live_side_and_a_live_edit_reaches_git(d: Driver) {
    let (w, _held) = d.start(&[]);
    let path = d.path("demo");
    let bob = w.push_edit(&path, "hello", "from-git");
    d.wait_applied(&w, &bob);
    wait_greeting(d, &w, "demo", "from-git");
    let in_git = w.show(&path).expect("the file");
    assert!(
        in_git.contains("from-git") && !in_git.contains(d.stamp()),
        "{in_git}"
    );
    set_greeting(&w, "demo", "live-edit");
    w.wait_file(&path, |t| t.contains("live-edit"));
    assert_quiescent(&w, Duration::from_secs(3));
    assert_eq!(greeting(&w, "demo").as_deref(), Some("live-edit"));
}

/// An edit decided before the flush (waiting in a long commit window) is in the commit the
/// apply applies: a push of another object lands with it, and the edit is never reverted.
fn an_edit_waiting_in_the_window_is_in_the_commit_applied(d: Driver) {
    let (w, _held) = d.start(&["--commit-window", "5m"]);
    edit_and_wait_submitted(&w, d.target(), || set_greeting(&w, "demo", "pending"));
    let clone = w.clone_origin("carol");
    let pushed = d.path("pushed");
    std::fs::write(
        clone.join(&pushed),
        configmap("shop", "pushed", &[("greeting", "from-git")]),
    )
    .expect("write");
    let carol = w.commit_all_and_push_rebasing(&clone, "carol adds pushed");
    let op = d.wait_applied(&w, &carol);
    wait_greeting(d, &w, "pushed", "from-git");
    let applied = op["commit"].as_str().expect("the applied commit");
    let demo = w
        .show_at(applied, &d.path("demo"))
        .expect("demo at the applied commit");
    assert!(
        demo.contains("pending"),
        "the flush published the edit first:\n{demo}\n{:#}\n{}",
        d.claim(&w),
        w.git(&["log", "--format=%h %s", "--stat", "-6", "main"])
    );
    assert_quiescent(&w, Duration::from_secs(3));
    assert_eq!(greeting(&w, "demo").as_deref(), Some("pending"));
}

/// A file removed from the folder prunes what the applier applied from it.
fn a_removed_file_is_pruned_from_the_live_side(d: Driver) {
    let (w, _held) = d.start(&[]);
    let path = d.path("demo");
    // Applied by the applier first: Flux and Argo CD prune only what they applied.
    let bob = w.push_edit(&path, "hello", "from-git");
    d.wait_applied(&w, &bob);
    wait_greeting(d, &w, "demo", "from-git");
    let clone = w.clone_origin("dave");
    std::fs::remove_file(clone.join(&path)).expect("remove");
    let dave = w.commit_all_and_push_rebasing(&clone, "dave removes demo");
    d.wait_applied(&w, &dave);
    wait_for(
        "the removal to reach the live side",
        || {
            format!(
                "{:?}\n{:#}\n{}",
                greeting(&w, "demo"),
                d.claim(&w),
                w.git(&["log", "--format=%h %s", "--stat", "-6", "main"])
            )
        },
        || {
            (w.kubectl_run(&["get", "configmap", "demo", "-n", "shop"])
                .code
                != Some(0))
            .then_some(())
        },
    );
    assert_quiescent(&w, Duration::from_secs(3));
    assert_eq!(w.show(&path), None, "Git keeps the removal");
}

/// An edit made after the flush, while a requested apply of a push that changed the object
/// runs, keeps its value in Git, and the live side ends with it: Flux and Argo CD write over it
/// until the Repair, the native applier leaves it. The flush is held by a locked branch ref.
fn an_edit_made_while_an_apply_runs_keeps_its_value(d: Driver) {
    let (w, _held) = d.start(&["--commit-window", "5m"]);
    let created = http(
        w.addr(),
        "POST",
        "/api/v1/namespaces/shop/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("X-Backflow-Wait", "pushed;timeout=60s"),
        ],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"},"data":{"greeting":"hello"}}"#,
    );
    assert_eq!(created.status, 201, "{created:?}");
    w.wait_file(&d.path("other"), |t| t.contains("hello"));
    // An edit waiting in the window, so the flush before the apply has something to push.
    edit_and_wait_submitted(&w, d.target(), || set_greeting(&w, "other", "pending"));
    d.suspend(&w, true);
    let bob = w.push_edit(&d.path("demo"), "hello", "from-git");
    let failed = w.lock_branch();
    d.suspend(&w, false);
    w.wait_push_failed(failed);
    let collisions =
        |w: &World| metric_sum(&w.metrics(), "backflow_apply_window_collisions_total", &[]);
    let collisions_before = collisions(&w);
    set_greeting(&w, "demo", "live-edit");
    w.unlock_branch();
    d.wait_applied(&w, &bob);
    wait_greeting(d, &w, "demo", "live-edit");
    assert_quiescent(&w, Duration::from_secs(3));
    assert_eq!(greeting(&w, "demo").as_deref(), Some("live-edit"));
    assert_eq!(greeting(&w, "other").as_deref(), Some("pending"));
    let text = w.show(&d.path("demo")).expect("the file");
    assert!(text.contains("live-edit"), "Git keeps the edit:\n{text}");
    let repaired = collisions(&w) > collisions_before;
    assert_eq!(
        repaired,
        d != Driver::Native,
        "Flux and Argo CD apply over the edit and are repaired; the native applier leaves it"
    );
}

/// Runs each scenario with each driver: `drivers::native::<scenario>`, `drivers::flux::…`,
/// `drivers::argo::…`.
macro_rules! three_drivers {
    ($($scenario:ident),* $(,)?) => {
        mod native {
            $(#[test] fn $scenario() { super::$scenario(super::Driver::Native) })*
        }
        mod flux {
            $(#[test] fn $scenario() { super::$scenario(super::Driver::Flux) })*
        }
        mod argo {
            $(#[test] fn $scenario() { super::$scenario(super::Driver::Argo) })*
        }
    };
}

three_drivers!(
    a_push_reaches_the_live_side_and_a_live_edit_reaches_git,
    an_edit_waiting_in_the_window_is_in_the_commit_applied,
    a_removed_file_is_pruned_from_the_live_side,
    an_edit_made_while_an_apply_runs_keeps_its_value,
);
