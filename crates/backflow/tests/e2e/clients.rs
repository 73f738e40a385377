//! Clients nobody on this project wrote, driving `backflow serve` through their documented
//! APIs with the kubeconfig it writes.

use crate::common::*;

/// `@kubernetes/client-node` (npm): it refuses a kubeconfig naming an http:// server unless TLS
/// verification is declared off, which the written kubeconfig now does.
const CLIENT_NODE: &str = r"
import * as k8s from '@kubernetes/client-node';
const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv.at(-1));
const core = kc.makeApiClient(k8s.CoreV1Api);
const out = {};
out.namespaces = (await core.listNamespace()).items.map(n => n.metadata.name);
await core.createNamespacedConfigMap({namespace: 'default',
  body: {metadata: {name: 'from-node', labels: {app: 'node'}}, data: {a: '1'}}});
await core.patchNamespacedConfigMap({namespace: 'default', name: 'from-node',
  body: {data: {a: '2'}}}, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
const read = await core.readNamespacedConfigMap({namespace: 'default', name: 'from-node'});
out.value = read.data.a;
out.selected = (await core.listNamespacedConfigMap({namespace: 'default', labelSelector: 'app=node'}))
  .items.map(c => c.metadata.name);
try {
  await core.readNamespacedConfigMap({namespace: 'default', name: 'nope'});
} catch (e) { out.missing = e.code; }
await core.deleteNamespacedConfigMap({namespace: 'default', name: 'from-node'});
console.log(JSON.stringify(out));
";

#[test]
fn kubernetes_client_node_reads_the_written_kubeconfig_and_drives_the_api() {
    let w = World::start(&["--no-mirror"]);
    let kubeconfig = w.dirs.data.join("kubeconfig");
    let out = backflow_testkit::node::run_module(CLIENT_NODE, &[&kubeconfig.to_string_lossy()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client-node failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        answer["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "default"),
        "{answer}"
    );
    assert_eq!(answer["value"], "2", "{answer}");
    assert_eq!(answer["selected"], serde_json::json!(["from-node"]));
    assert_eq!(answer["missing"], 404);
    assert!(
        w.kubectl_run(&["get", "configmap", "from-node"]).code != Some(0),
        "deleted"
    );
}
