//! Kustomize layouts: an overlay in a coordinated folder is applied as its build, and live
//! edits of what a layout builds are projected back into the layout.

use crate::apply::{claim, cm_value, wait_acting};
use crate::common::{World, configmap, wait_for};

/// A base beside an overlay that renames and patches it, pushed to `serve`'s folder: the
/// overlay is applied as its build — what Flux's kustomize-controller would apply for the
/// folder — never its patch as if it were the object; the base (whose kustomization only lists
/// its files) is applied as it is. The applied build writes nothing back to Git, and a live
/// edit of a built object lands in the overlay's patch.
#[test]
fn an_overlay_pushed_to_a_coordinated_folder_is_applied_as_its_build() {
    let w = World::start(&[]);
    wait_acting(&w);
    let clone = w.clone_origin("bob");
    let base = clone.join("live/apps/base");
    let prod = clone.join("live/apps/prod");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&prod).unwrap();
    std::fs::write(
        base.join("kustomization.yaml"),
        "resources: [settings.yaml]\n",
    )
    .unwrap();
    std::fs::write(
        base.join("settings.yaml"),
        configmap(
            "default",
            "settings",
            &[("color", "blue"), ("size", "small")],
        ),
    )
    .unwrap();
    std::fs::write(
        prod.join("kustomization.yaml"),
        "namePrefix: prod-\nresources: [../base]\npatches: [{path: bigger.yaml}]\n",
    )
    .unwrap();
    std::fs::write(
        prod.join("bigger.yaml"),
        "# production is bigger\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  size: large\n",
    )
    .unwrap();
    let pushed = w.commit_all_and_push_rebasing(&clone, "a base and an overlay");
    crate::apply::wait_applied(&w, &pushed);
    assert_eq!(
        cm_value(&w, "prod-settings", "size").as_deref(),
        Some("large")
    );
    assert_eq!(
        cm_value(&w, "prod-settings", "color").as_deref(),
        Some("blue")
    );
    assert_eq!(
        cm_value(&w, "settings", "size").as_deref(),
        Some("small"),
        "the overlay's patch was applied as if it were the object"
    );
    w.wait_settled();
    let files = w.files();
    assert!(
        !files.iter().any(|f| f.contains("prod-settings")),
        "the applied build was written back as a file: {files:?}"
    );
    w.kubectl(&[
        "patch",
        "configmap",
        "prod-settings",
        "--type=merge",
        "-p",
        r#"{"data":{"size":"huge"}}"#,
    ]);
    let patch = w.wait_file("live/apps/prod/bigger.yaml", |t| t.contains("size: huge"));
    assert!(patch.starts_with("# production is bigger"), "{patch}");
    assert_eq!(w.files(), files, "no file added or removed");
    let claim = claim(&w);
    assert!(
        !claim["conditions"].to_string().contains("UnreadableFiles"),
        "{claim:#}"
    );
}

/// Files of a base and a production overlay: prefix, labels, an image tag, replicas, a patch.
fn write_layout(clone: &std::path::Path) {
    let base = clone.join("live/apps/base");
    let prod = clone.join("live/apps/prod");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&prod).unwrap();
    for (dir, name, text) in [
        (
            &base,
            "kustomization.yaml",
            "resources: [web.yaml, settings.yaml]\n",
        ),
        (
            &base,
            "web.yaml",
            "# the web tier\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        env:\n        - name: MODE # how it serves\n          value: base\n",
        ),
        (
            &base,
            "settings.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n  size: small\n",
        ),
        (
            &prod,
            "kustomization.yaml",
            "# production\nnamePrefix: prod-\ncommonLabels:\n  env: prod\nresources:\n- ../base\nimages:\n- name: nginx\n  newTag: \"1.27\" # pinned\nreplicas:\n- name: web\n  count: 2\npatches:\n- path: bigger.yaml\n",
        ),
        (
            &prod,
            "bigger.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  size: large\n",
        ),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// A layout built and applied by somebody else (real `kubectl apply -k`, as Flux would) into a
/// folder backflow mirrors: each live edit lands in the document responsible — the image tag
/// in the overlay's `images:`, the replicas in its `replicas:`, a patched value in the patch, a
/// base value in the base — comments kept, and real kustomize then builds what is live; a
/// label the overlay gives every object is refused for that object, saying why, and Git keeps
/// it. Nothing is written as a new file.
#[test]
fn live_edits_of_a_built_layout_land_in_the_document_responsible() {
    let w = World::start(&["--no-apply"]);
    w.wait_settled();
    let clone = w.clone_origin("bob");
    write_layout(&clone);
    w.commit_all_and_push_rebasing(&clone, "a base and a production overlay");
    let overlay = clone.join("live/apps/prod");
    let applied = w.kubectl_run(&["apply", "-k", &overlay.to_string_lossy()]);
    assert_eq!(applied.code, Some(0), "{applied}");
    w.wait_settled();
    let files_before = w.files();
    w.kubectl(&["set", "image", "deployment/prod-web", "web=nginx:1.28"]);
    w.wait_file("live/apps/prod/kustomization.yaml", |t| {
        t.contains("newTag: \"1.28\" # pinned")
    });
    w.kubectl(&["scale", "deployment/prod-web", "--replicas=3"]);
    w.wait_file("live/apps/prod/kustomization.yaml", |t| {
        t.contains("count: 3")
    });
    w.kubectl(&[
        "patch",
        "configmap",
        "prod-settings",
        "--type=merge",
        "-p",
        r#"{"data":{"size":"huge","color":"green"}}"#,
    ]);
    w.wait_file("live/apps/prod/bigger.yaml", |t| t.contains("size: huge"));
    let base = w.wait_file("live/apps/base/settings.yaml", |t| {
        t.contains("color: green")
    });
    assert!(base.contains("size: small"), "{base}");
    w.kubectl(&["set", "env", "deployment/prod-web", "MODE=tuned"]);
    let web = w.wait_file("live/apps/base/web.yaml", |t| t.contains("value: tuned"));
    assert!(
        web.starts_with("# the web tier") && web.contains("- name: MODE # how it serves"),
        "{web}"
    );
    assert_eq!(w.files(), files_before, "no file was added or removed");
    // Real kustomize builds, from what Git holds now, what is live.
    let pulled = w.clone_origin("check");
    let out = std::process::Command::new(backflow_testkit::kubectl::binary("1.33"))
        .args([
            "kustomize",
            &pulled.join("live/apps/prod").to_string_lossy(),
        ])
        .output()
        .unwrap();
    let built = String::from_utf8_lossy(&out.stdout).into_owned();
    for want in [
        "image: nginx:1.28",
        "replicas: 3",
        "size: huge",
        "color: green",
        "value: tuned",
    ] {
        assert!(built.contains(want), "{want} not in the build:\n{built}");
    }
    // A label the overlay gives every object: no document can take it for this one alone.
    w.kubectl(&[
        "label",
        "configmap",
        "prod-settings",
        "env=staging",
        "--overwrite",
    ]);
    let refused = wait_for(
        "the refusal",
        || {
            w.kubectl(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=prod-settings",
            ])
        },
        || {
            w.get_json(&[
                "events",
                "--field-selector",
                "involvedObject.name=prod-settings",
            ])["items"]
                .as_array()?
                .iter()
                .find(|e| e["reason"] == "WriteRefused")
                .and_then(|e| e["message"].as_str().map(str::to_string))
        },
    );
    assert!(
        refused.contains("kustomize layout") && refused.contains("/metadata/labels/env"),
        "{refused}"
    );
    assert!(
        w.show("live/apps/prod/kustomization.yaml")
            .unwrap()
            .contains("env: prod")
    );
}

/// A claim on an overlay folder whose base lies elsewhere in the repository (`apps/prod` with
/// `resources: [../base]`): the overlay's build is applied — the base read as the build needs
/// it, as Flux reads the whole repository — and the base's own files are no objects of the
/// claim (they belong to no claim's folder).
#[test]
fn an_overlay_whose_base_is_outside_the_claims_folder_is_built_with_it() {
    let w = World::start(&[]);
    wait_acting(&w);
    crate::apply::one_way_default(&w);
    w.apply(
        r"apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {name: apps, namespace: backflow-system}
spec: {}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: apps, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: apps/prod
  applierClaimRef: {kind: NativeClaim, name: apps}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {name: apps, namespace: backflow-system}
spec: {targetRef: {name: apps}, rules: [{apiGroups: [''], resources: [configmaps], sourceNamespace: shop}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
",
    );
    wait_for(
        "the apps claim to act",
        || format!("{:?}", w.target_condition("apps", "ApplierClaimReady")),
        || {
            w.target_condition("apps", "ApplierClaimReady")
                .is_some_and(|c| c.status == "True")
                .then_some(())
        },
    );
    w.wait_settled();
    let clone = w.clone_origin("bob");
    let base = clone.join("apps/base");
    let prod = clone.join("apps/prod");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&prod).unwrap();
    std::fs::write(
        base.join("kustomization.yaml"),
        "resources: [settings.yaml]\n",
    )
    .unwrap();
    std::fs::write(
        base.join("settings.yaml"),
        configmap("shop", "settings", &[("color", "blue"), ("size", "small")]),
    )
    .unwrap();
    std::fs::write(
        prod.join("kustomization.yaml"),
        "namePrefix: prod-\nresources: [../base]\npatches: [{path: bigger.yaml}]\n",
    )
    .unwrap();
    std::fs::write(
        prod.join("bigger.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  size: large\n",
    )
    .unwrap();
    w.commit_all_and_push_rebasing(&clone, "an overlay of a base elsewhere");
    let applied = wait_for(
        "the overlay's build applied",
        || {
            format!(
                "{:#}",
                w.get_json(&["nativeclaim", "apps", "-n", "backflow-system"])["status"]
            )
        },
        || {
            let got = w.kubectl_run(&[
                "get",
                "configmap",
                "prod-settings",
                "-n",
                "shop",
                "-o",
                "json",
            ]);
            (got.code == Some(0)).then_some(got.stdout)
        },
    );
    let applied: serde_json::Value = serde_json::from_str(&applied).unwrap();
    assert_eq!(applied["data"]["size"], "large", "{applied:#}");
    assert_eq!(applied["data"]["color"], "blue", "{applied:#}");
    let base_object = w.kubectl_run(&["get", "configmap", "settings", "-n", "shop"]);
    assert_ne!(
        base_object.code,
        Some(0),
        "the base outside the folder was applied raw: {base_object}"
    );
    let status =
        w.get_json(&["nativeclaim", "apps", "-n", "backflow-system"])["status"].to_string();
    assert!(!status.contains("UnreadableFiles"), "{status}");
}
