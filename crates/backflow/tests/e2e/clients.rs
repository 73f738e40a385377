//! Clients nobody on this project wrote, driving `backflow serve` through their documented
//! APIs with the kubeconfig it writes.

use crate::common::*;

/// `@kubernetes/client-node` (npm): it refuses a kubeconfig naming an http:// server unless TLS
/// verification is declared off, which the written kubeconfig now does. Then discovery, CRUD,
/// merge and JSON patches and server-side apply, a watch from a resourceVersion and 410 Expired for one the
/// history no longer holds, pagination, a custom resource's status subresource.
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
await core.patchNamespacedConfigMap({namespace: 'default', name: 'from-node',
  body: [{op: 'add', path: '/data/b', value: 'json'}]},
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch));
const read = await core.readNamespacedConfigMap({namespace: 'default', name: 'from-node'});
out.value = read.data.a;
out.json_patch = read.data.b;
out.selected = (await core.listNamespacedConfigMap({namespace: 'default', labelSelector: 'app=node'}))
  .items.map(c => c.metadata.name);
try {
  await core.readNamespacedConfigMap({namespace: 'default', name: 'nope'});
} catch (e) { out.missing = e.code; }
await core.deleteNamespacedConfigMap({namespace: 'default', name: 'from-node'});
const version = await kc.makeApiClient(k8s.VersionApi).getCode();
out.version = version.gitVersion;
out.groups = (await kc.makeApiClient(k8s.ApisApi).getAPIVersions()).groups.map(g => g.name);

// A watch from a resourceVersion sees the two changes made after it.
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const created = await core.createNamespacedConfigMap({namespace: 'default',
  body: {metadata: {name: 'watched'}, data: {v: '0'}}});
const rv0 = created.metadata.resourceVersion;
for (const v of ['1', '2']) {
  await core.patchNamespacedConfigMap({namespace: 'default', name: 'watched', body: {data: {v}}}, merge);
}
out.watch = await new Promise((resolve, reject) => {
  const seen = [];
  let controller, stop = false;
  new k8s.Watch(kc).watch('/api/v1/namespaces/default/configmaps',
    {resourceVersion: rv0, fieldSelector: 'metadata.name=watched', timeoutSeconds: 10},
    (type, obj) => {
      seen.push([type, obj.data.v]);
      if (seen.length === 2) { stop = true; controller?.abort(); resolve(seen); }
    },
    (err) => { if (seen.length < 2) reject(err ?? new Error('the watch ended early')); },
  ).then(c => { controller = c; if (stop) c.abort(); }, reject);
});

// Server-side apply.
const applied = await core.patchNamespacedConfigMap({namespace: 'default', name: 'node-ssa',
  fieldManager: 'node-client', force: true,
  body: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'node-ssa'}, data: {k: 'v'}}},
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply));
out.ssa = [applied.data.k, applied.metadata.managedFields[0].manager];

// Pages of a label-selected list.
for (let i = 0; i < 30; i++) {
  await core.createNamespacedConfigMap({namespace: 'default',
    body: {metadata: {name: `page-${String(i).padStart(2, '0')}`, labels: {page: 'yes'}}}});
}
const first = await core.listNamespacedConfigMap({namespace: 'default', labelSelector: 'page=yes', limit: 20});
const rest = await core.listNamespacedConfigMap({namespace: 'default', labelSelector: 'page=yes',
  limit: 20, _continue: first.metadata._continue});
out.pages = [first.items.length, rest.items.length, rest.metadata._continue ?? null];

// A watch from a resourceVersion the history no longer holds: 410 Expired.
out.expired = await new Promise((resolve) => {
  new k8s.Watch(kc).watch('/api/v1/namespaces/default/configmaps',
    {resourceVersion: rv0, timeoutSeconds: 5},
    (type, obj) => { if (type === 'ERROR') resolve(obj.code); },
    (err) => resolve(err ? (err.statusCode ?? String(err)) : 'ended without an error'),
  ).catch(err => resolve(err.statusCode ?? String(err)));
});

// A custom resource and its status subresource (which ignores spec).
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const widgets = {group: 'example.com', version: 'v1', namespace: 'default', plural: 'widgets'};
await custom.createNamespacedCustomObject({...widgets,
  body: {apiVersion: 'example.com/v1', kind: 'Widget', metadata: {name: 'nw'}, spec: {size: 1}}});
await custom.patchNamespacedCustomObjectStatus({...widgets, name: 'nw',
  body: {spec: {size: 9}, status: {phase: 'Ready'}}}, merge);
const widget = await custom.getNamespacedCustomObject({...widgets, name: 'nw'});
out.widget = [widget.spec.size, widget.status.phase];
console.log(JSON.stringify(out));
";

#[test]
fn kubernetes_client_node_reads_the_written_kubeconfig_and_drives_the_api() {
    // A short history, so a watch from an early write's version expires after 30 more.
    let w = World::start(&["--no-mirror", "--watch-history", "20"]);
    w.apply(WIDGET_CRD);
    w.wait_established(&["widgets.example.com"]);
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
    assert_eq!(answer["json_patch"], "json", "{answer}");
    assert_eq!(answer["selected"], serde_json::json!(["from-node"]));
    assert_eq!(answer["missing"], 404);
    assert!(
        w.kubectl_run(&["get", "configmap", "from-node"]).code != Some(0),
        "deleted"
    );
    assert_kubernetes_version(&answer);
    assert!(
        answer["groups"].to_string().contains("\"apps\""),
        "{answer}"
    );
    assert_eq!(
        answer["watch"],
        serde_json::json!([["MODIFIED", "1"], ["MODIFIED", "2"]])
    );
    assert_eq!(answer["ssa"], serde_json::json!(["v", "node-client"]));
    assert_eq!(answer["pages"], serde_json::json!([20, 10, null]));
    assert_eq!(answer["expired"], 410, "{answer}");
    assert_eq!(answer["widget"], serde_json::json!([1, "Ready"]));
}

/// The client read a Kubernetes version (`v1.…`) from the server.
fn assert_kubernetes_version(answer: &serde_json::Value) {
    assert!(
        answer["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.")),
        "{answer}"
    );
}

/// Runs a Python client script with the written kubeconfig; its last stdout line is JSON.
fn python_answer(w: &World, script: &str) -> serde_json::Value {
    let kubeconfig = w.dirs.data.join("kubeconfig");
    let out = backflow_testkit::python::run(script, &[&kubeconfig.to_string_lossy()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The official Python client (`kubernetes` on PyPI): discovery, CRUD, merge and JSON patches,
/// server-side apply through its dynamic client, pagination, a watch from a resourceVersion,
/// 410 Expired for one older than the history holds, a custom resource's status subresource.
const PYTHON_CLIENT: &str = r"
import sys, json
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
config.load_kube_config(sys.argv[1])
out = {}
out['version'] = client.VersionApi().get_code().git_version
out['groups'] = [g.name for g in client.ApisApi().get_api_versions().groups]
core = client.CoreV1Api()
out['has_configmaps'] = any(r.name == 'configmaps' for r in core.get_api_resources().resources)
cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name='py', labels={'app': 'py'}), data={'a': '1'})
rv0 = core.create_namespaced_config_map('default', cm).metadata.resource_version
core.patch_namespaced_config_map('py', 'default', {'data': {'a': '2'}})
out['merge'] = core.read_namespaced_config_map('py', 'default').data['a']
core.api_client.set_default_header('Content-Type', 'application/json-patch+json')
core.patch_namespaced_config_map('py', 'default', [{'op': 'replace', 'path': '/data/a', 'value': '3'}])
core.api_client.default_headers.pop('Content-Type', None)
out['json_patch'] = core.read_namespaced_config_map('py', 'default').data['a']
seen = []
w = watch.Watch()
for ev in w.stream(core.list_namespaced_config_map, 'default', resource_version=rv0,
                   field_selector='metadata.name=py', timeout_seconds=5):
    seen.append([ev['type'], ev['object'].data['a']])
    if len(seen) == 2:
        w.stop()
out['watch'] = seen
cms = DynamicClient(client.ApiClient()).resources.get(api_version='v1', kind='ConfigMap')
applied = cms.server_side_apply(body={'apiVersion': 'v1', 'kind': 'ConfigMap',
    'metadata': {'name': 'py-ssa'}, 'data': {'k': 'v'}}, name='py-ssa', namespace='default',
    field_manager='py-client')
out['ssa'] = [applied.data.k, applied.metadata.managedFields[0].manager]
for i in range(30):
    core.create_namespaced_config_map('default', client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f'page-{i:02}', labels={'page': 'yes'})))
first = core.list_namespaced_config_map('default', label_selector='page=yes', limit=20)
rest = core.list_namespaced_config_map('default', label_selector='page=yes', limit=20,
                                       _continue=first.metadata._continue)
out['pages'] = [len(first.items), len(rest.items), rest.metadata._continue]
try:
    for ev in watch.Watch().stream(core.list_namespaced_config_map, 'default', resource_version=rv0,
                                   timeout_seconds=5):
        out['expired'] = ev['type']
        break
except ApiException as e:
    out['expired'] = e.status
try:
    core.read_namespaced_config_map('nope', 'default')
except ApiException as e:
    out['missing'] = e.status
custom = client.CustomObjectsApi()
custom.create_namespaced_custom_object('example.com', 'v1', 'default', 'widgets',
    {'apiVersion': 'example.com/v1', 'kind': 'Widget', 'metadata': {'name': 'pw'}, 'spec': {'size': 1}})
custom.patch_namespaced_custom_object_status('example.com', 'v1', 'default', 'widgets', 'pw',
    {'spec': {'size': 9}, 'status': {'phase': 'Ready'}})
widget = custom.get_namespaced_custom_object('example.com', 'v1', 'default', 'widgets', 'pw')
out['widget'] = [widget['spec']['size'], widget['status']['phase']]
print(json.dumps(out))
";

#[test]
fn the_official_python_client_drives_the_api() {
    // A short history, so a watch from the first write's version expires once 30 more are made.
    let w = World::start(&["--no-mirror", "--watch-history", "20"]);
    w.apply(WIDGET_CRD);
    w.wait_established(&["widgets.example.com"]);
    let answer = python_answer(&w, PYTHON_CLIENT);
    assert_kubernetes_version(&answer);
    assert!(
        answer["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "apps"),
        "{answer}"
    );
    assert_eq!(answer["has_configmaps"], true);
    assert_eq!(
        (&answer["merge"], &answer["json_patch"]),
        (&serde_json::json!("2"), &serde_json::json!("3"))
    );
    assert_eq!(
        answer["watch"],
        serde_json::json!([["MODIFIED", "2"], ["MODIFIED", "3"]])
    );
    assert_eq!(answer["ssa"], serde_json::json!(["v", "py-client"]));
    assert_eq!(answer["pages"], serde_json::json!([20, 10, null]));
    assert_eq!(answer["expired"], 410, "{answer}");
    assert_eq!(answer["missing"], 404);
    assert_eq!(answer["widget"], serde_json::json!([1, "Ready"]));
}

/// `kr8s` (PyPI): version, create, patch, refresh, label-selected list, label, delete; a list
/// of 230 in pages of 100, a watch from a resourceVersion, a custom resource's status
/// subresource (which ignores spec).
const KR8S: &str = r"
import sys, json
import kr8s
from kr8s.objects import ConfigMap, new_class
api = kr8s.api(kubeconfig=sys.argv[1])
out = {'version': api.version()['gitVersion']}
cm = ConfigMap({'metadata': {'name': 'kr', 'namespace': 'default', 'labels': {'app': 'kr'}},
                'data': {'a': '1'}}, api=api)
cm.create()
cm.patch({'data': {'a': '2'}})
cm.refresh()
out['value'] = cm.raw['data']['a']
out['selected'] = [c.name for c in api.get('configmaps', namespace='default', label_selector={'app': 'kr'})]
cm.label(extra='yes')
cm.refresh()
out['labels'] = cm.labels
cm.delete()
out['gone'] = not cm.exists()
# kr8s lists 100 at a time and follows `continue`.
for i in range(230):
    ConfigMap({'metadata': {'name': f'pg-{i:03}', 'namespace': 'default', 'labels': {'page': 'yes'}}},
              api=api).create()
out['paged'] = len(list(api.get('configmaps', namespace='default', label_selector={'page': 'yes'})))
watched = ConfigMap({'metadata': {'name': 'kw', 'namespace': 'default'}, 'data': {'v': '0'}}, api=api)
watched.create()
rv0 = watched.metadata.resourceVersion
for v in ['1', '2']:
    watched.patch({'data': {'v': v}})
seen = []
for kind, obj in api.watch('configmaps', namespace='default', field_selector='metadata.name=kw', since=rv0):
    seen.append([kind, obj.raw['data']['v']])
    if len(seen) == 2:
        break
out['watch'] = seen
Widget = new_class('Widget', version='example.com/v1', namespaced=True, asyncio=False)
widget = Widget({'metadata': {'name': 'kw1', 'namespace': 'default'}, 'spec': {'size': 1}}, api=api)
widget.create()
widget.patch({'status': {'phase': 'Ready'}, 'spec': {'size': 9}}, subresource='status')
widget.refresh()
out['widget'] = [widget.raw['spec']['size'], widget.raw['status']['phase']]
print(json.dumps(out))
";

#[test]
fn kr8s_drives_the_api() {
    let w = World::start(&["--no-mirror"]);
    w.apply(WIDGET_CRD);
    w.wait_established(&["widgets.example.com"]);
    let answer = python_answer(&w, KR8S);
    assert_kubernetes_version(&answer);
    assert_eq!(answer["value"], "2");
    assert_eq!(answer["selected"], serde_json::json!(["kr"]));
    assert_eq!(
        answer["labels"],
        serde_json::json!({"app": "kr", "extra": "yes"})
    );
    assert_eq!(answer["gone"], true);
    assert_eq!(answer["paged"], 230, "{answer}");
    assert_eq!(
        answer["watch"],
        serde_json::json!([["MODIFIED", "1"], ["MODIFIED", "2"]])
    );
    assert_eq!(answer["widget"], serde_json::json!([1, "Ready"]));
}

/// A `kopf` operator: on create it adopts a child `ConfigMap` (owner reference) and sets the
/// status; on a size change it updates the child; on delete its finalizer holds the Widget until
/// the handler removed the child.
const KOPF_OPERATOR: &str = r"
import kopf, kubernetes

@kopf.on.create('example.com', 'v1', 'widgets')
def create(spec, name, namespace, body, patch, **_):
    child = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': f'{name}-child'},
             'data': {'size': str(spec.get('size', 0))}}
    kopf.adopt(child, owner=body)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, child)
    patch.status['phase'] = 'Ready'

@kopf.on.update('example.com', 'v1', 'widgets', field='spec.size')
def resize(new, name, namespace, patch, **_):
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        f'{name}-child', namespace, {'data': {'size': str(new)}})
    patch.status['phase'] = 'Resized'

@kopf.on.delete('example.com', 'v1', 'widgets')
def delete(name, namespace, **_):
    kubernetes.client.CoreV1Api().delete_namespaced_config_map(f'{name}-child', namespace)
";

const WIDGET_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[test]
fn a_kopf_operator_reconciles_a_custom_resource_with_a_finalizer_and_an_owned_child() {
    let w = World::start(&["--no-mirror"]);
    w.apply(WIDGET_CRD);
    w.wait_established(&["widgets.example.com"]);
    let operator = w.dirs.work.join("operator.py");
    std::fs::write(&operator, KOPF_OPERATOR).unwrap();
    let mut kopf = backflow_testkit::python::command(
        "import sys, kopf.cli; sys.exit(kopf.cli.main())",
        &[
            "run",
            "--standalone",
            "--namespace",
            "default",
            &operator.to_string_lossy(),
        ],
    );
    let kopf = kopf
        .env("KUBECONFIG", w.dirs.data.join("kubeconfig"))
        .current_dir(&w.dirs.work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kopf starts");
    let kopf = KillOnDrop(kopf);
    w.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n");
    let child = wait_for(
        "the operator to create the child",
        || format!("{}", w.kubectl_run(&["get", "widget", "w1", "-o", "json"])),
        || {
            let out = w.kubectl_run(&["get", "configmap", "w1-child", "-o", "json"]);
            serde_json::from_str::<serde_json::Value>(&out.stdout).ok()
        },
    );
    assert_eq!(child["data"]["size"], "3");
    assert_eq!(child["metadata"]["ownerReferences"][0]["kind"], "Widget");
    assert_eq!(child["metadata"]["ownerReferences"][0]["name"], "w1");
    let widget = wait_for(
        "the operator to set the status",
        || w.kubectl(&["get", "widget", "w1", "-o", "json"]),
        || {
            let widget = w.get_json(&["widget", "w1"]);
            (widget["status"]["phase"] == "Ready").then_some(widget)
        },
    );
    assert!(
        widget["metadata"]["finalizers"]
            .to_string()
            .contains("kopf"),
        "kopf holds the Widget with its finalizer: {widget}"
    );
    w.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":5}}"#,
    ]);
    wait_for(
        "the operator to resize the child",
        || w.kubectl(&["get", "configmap", "w1-child", "-o", "json"]),
        || {
            (w.get_json(&["configmap", "w1-child"])["data"]["size"] == "5"
                && w.get_json(&["widget", "w1"])["status"]["phase"] == "Resized")
                .then_some(())
        },
    );
    w.kubectl(&["delete", "widget", "w1", "--wait=true", "--timeout=30s"]);
    assert_ne!(
        w.kubectl_run(&["get", "configmap", "w1-child"]).code,
        Some(0),
        "the delete handler ran before the finalizer let the Widget go"
    );
    drop(kopf);
}

/// A child process killed (by its own PID) when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
