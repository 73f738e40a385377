//! Kustomize layouts in a coordinated folder: until backflow applies kustomize builds, an
//! overlay's files (patches, prefixes, generators, bases from elsewhere) are never applied as
//! if they were objects — each is reported and its objects left as they are.

use crate::apply::{claim, cm_value, wait_acting};
use crate::common::{World, configmap, wait_for};

/// A base beside an overlay that renames and patches it, pushed to `serve`'s folder: the base
/// (a folder whose kustomization only lists its files) is applied as before; the overlay's
/// patch — a partial `ConfigMap` of the same name — is not applied over it, and the claim says
/// why, naming the overlay's kustomization and what it does.
#[test]
fn an_overlay_pushed_to_a_coordinated_folder_is_not_applied_as_raw_files() {
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
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  size: large\n",
    )
    .unwrap();
    let pushed = w.commit_all_and_push_rebasing(&clone, "a base and an overlay");
    let applied = crate::apply::wait_applied(&w, &pushed);
    let told = wait_for(
        "the claim to report the overlay",
        || format!("{:#}", claim(&w)),
        || {
            claim(&w)["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["reason"] == "UnreadableFiles")
                .and_then(|c| c["message"].as_str().map(str::to_string))
        },
    );
    assert!(
        told.contains("live/apps/prod/kustomization.yaml builds its folder with kustomize")
            && told.contains("namePrefix")
            && told.contains("patches"),
        "{told}\n{applied:#}"
    );
    assert_eq!(cm_value(&w, "settings", "color").as_deref(), Some("blue"));
    assert_eq!(
        cm_value(&w, "settings", "size").as_deref(),
        Some("small"),
        "the overlay's patch was applied as if it were the object"
    );
    let prefixed = w.kubectl_run(&["get", "configmap", "prod-settings"]);
    assert_ne!(prefixed.code, Some(0), "{prefixed}");
}
