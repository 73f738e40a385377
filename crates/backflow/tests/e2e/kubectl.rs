//! kubectl conformance: the real `backflow serve` binary driven by real kubectl binaries.
//!
//! The `kubectl` on `PATH` may be a dispatcher that runs a bundled `kubectl.1.NN` picked by the
//! server's reported version (1.32 here). To cover the clients people actually run, these tests
//! call every bundled `kubectl.1.27` … `kubectl.1.33` directly (`backflow_testkit::kubectl`);
//! a missing version fails its tests rather than skip them.
//!
//! Each test function is one command group against one kubectl version, with its own server,
//! data dir, `HOME`, `KUBECONFIG` and `--cache-dir` (kubectl caches discovery on disk). Every
//! kubectl run is bounded by a hang guard, but no assertion depends on timing.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{Out, Sandbox, Server};
use serde_json::Value;

/// How long any child process, and the server's start and stop, may take before the test is
/// declared hung (and the child killed); longer than [`crate::common::HANG_GUARD`].
const HANG_GUARD: Duration = Duration::from_secs(60);

use backflow_testkit::kubectl::binary as kubectl_binary;

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout = 0,
    Stderr = 1,
}

/// A running child whose output is collected as it comes; killed (by its handle) if still
/// running when dropped.
struct Running {
    what: String,
    child: Child,
    chunks: mpsc::Receiver<(Stream, Vec<u8>)>,
    /// Everything read so far, stdout then stderr.
    output: [Vec<u8>; 2],
    /// How much of each output [`Running::wait_for_line`] has looked at.
    scanned: [usize; 2],
}

impl Running {
    fn spawn(what: String, mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let (tx, chunks) = mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        for (stream, mut pipe) in [
            (Stream::Stdout, Box::new(out) as Box<dyn Read + Send>),
            (Stream::Stderr, Box::new(err)),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if tx.send((stream, buf[..n].to_vec())).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
        Self {
            what,
            child,
            chunks,
            output: [Vec::new(), Vec::new()],
            scanned: [0, 0],
        }
    }

    fn text(&self, stream: Stream) -> String {
        String::from_utf8_lossy(&self.output[stream as usize]).into_owned()
    }

    /// Reads output until a complete line of `stream` satisfies `pred`, and returns that line.
    fn wait_for_line(&mut self, stream: Stream, pred: impl Fn(&str) -> bool) -> String {
        let i = stream as usize;
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            while let Some(n) = self.output[i][self.scanned[i]..]
                .iter()
                .position(|b| *b == b'\n')
            {
                let start = self.scanned[i];
                self.scanned[i] += n + 1;
                let line = String::from_utf8_lossy(&self.output[i][start..start + n]).into_owned();
                if pred(&line) {
                    return line;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok((s, chunk)) => self.output[s as usize].extend_from_slice(&chunk),
                Err(e) => {
                    let _ = self.child.kill();
                    let status = self.child.wait();
                    panic!(
                        "{}: the awaited {stream:?} line never came ({e}; exit {status:?})\n--- stdout\n{}--- stderr\n{}",
                        self.what,
                        self.text(Stream::Stdout),
                        self.text(Stream::Stderr)
                    );
                }
            }
        }
    }

    /// Waits (bounded by the hang guard) for the child to exit and collects all its output.
    fn finish(mut self) -> Out {
        let deadline = Instant::now() + HANG_GUARD;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "hung: {} did not finish within {HANG_GUARD:?}\n--- stdout\n{}--- stderr\n{}",
                        self.what,
                        self.text(Stream::Stdout),
                        self.text(Stream::Stderr)
                    );
                }
                Err(e) => panic!("{}: cannot wait: {e}", self.what),
            }
        };
        // The reader threads end at EOF, which follows the exit.
        while let Ok((s, chunk)) = self.chunks.recv_timeout(HANG_GUARD) {
            self.output[s as usize].extend_from_slice(&chunk);
        }
        Out {
            code: status.code(),
            stdout: self.text(Stream::Stdout),
            stderr: self.text(Stream::Stderr),
        }
    }

    /// Kills the child by its handle and reaps it.
    fn kill(mut self) {
        self.child.kill().expect("kill the child");
        self.child.wait().expect("reap the child");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One kubectl version against one fresh server
// ---------------------------------------------------------------------------------------------

/// A kubectl version, a fresh server, and a private HOME, cache and working directory.
struct Kubectl {
    bin: PathBuf,
    /// The client's minor version (29, 32, 33).
    minor: u32,
    /// Declared before `dirs`: the server stops before its data dir is removed.
    server: Server,
    dirs: Sandbox,
}

impl Kubectl {
    fn new(bin: PathBuf, version: &str) -> Self {
        let minor = version
            .rsplit('.')
            .next()
            .and_then(|m| m.parse().ok())
            .expect("a version like 1.32");
        let dirs = Sandbox::new();
        // The API as kubectl sees it, without the applier stamping what it adopts.
        let server = Server::start_until_ready(&dirs.data, &["--no-apply"], HANG_GUARD);
        Self {
            bin,
            minor,
            server,
            dirs,
        }
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = self.dirs.kubectl(&self.bin, &self.server.kubeconfig, args);
        // kubectl diff and edit write their temporary files here.
        cmd.env("TMPDIR", &self.dirs.work)
            .env_remove("KUBE_EDITOR")
            .env_remove("EDITOR")
            .env_remove("KUBECTL_EXTERNAL_DIFF");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    fn describe(&self, args: &[&str]) -> String {
        format!("kubectl 1.{} {}", self.minor, args.join(" "))
    }

    /// Runs kubectl to completion.
    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        Running::spawn(self.describe(args), self.command(args, env)).finish()
    }

    fn run(&self, args: &[&str]) -> Out {
        self.run_env(args, &[])
    }

    /// Starts kubectl without waiting for it.
    fn spawn(&self, args: &[&str]) -> Running {
        Running::spawn(self.describe(args), self.command(args, &[]))
    }

    /// Runs kubectl, asserts it succeeded, and returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(out.code, Some(0), "{} failed:\n{out}", self.describe(args));
        out.stdout
    }

    /// Runs kubectl, asserts it exited with 1, and returns what it printed.
    fn fails(&self, args: &[&str]) -> Out {
        let out = self.run(args);
        assert_eq!(
            out.code,
            Some(1),
            "{} should fail:\n{out}",
            self.describe(args)
        );
        out
    }

    /// Writes a file into the working directory (kubectl runs there) and returns its name.
    fn file(&self, name: &str, content: &str) -> String {
        std::fs::write(self.dirs.work.join(name), content).expect("write a manifest");
        name.to_string()
    }

    /// `-o json` of one object.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
    }
}

/// Runs one command group against one kubectl version.
fn run(version: &str, group: fn(&Kubectl)) {
    group(&Kubectl::new(kubectl_binary(version), version));
}

/// The whitespace-separated cells of each line of a table.
fn table(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect()
}

/// The cells of the table row whose first cell is `name`.
fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    table(out)
        .into_iter()
        .find(|r| r.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{out}"))
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

// ---------------------------------------------------------------------------------------------
// Manifests
// ---------------------------------------------------------------------------------------------

const GET_FIXTURES: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: other
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm1
  labels:
    app: web
data:
  a: "1"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  a: "2"
  b: "3"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm3
  namespace: other
  labels:
    app: web
data:
  a: "4"
"#;

const APP_CONFIG: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  labels:
    app: web
data:
  a: "1"
"#;

const MULTI: &str = r"apiVersion: v1
kind: ConfigMap
metadata:
  name: m1
data:
  k: v1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: m2
data:
  k: v2
---
apiVersion: v1
kind: Secret
metadata:
  name: s1
stringData:
  password: hunter2
";

const WIDGET_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Color
      type: string
      jsonPath: .spec.color
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a thing for tests.
        properties:
          spec:
            type: object
            description: The desired shape of the widget.
            x-kubernetes-validations:
            - rule: self.size <= 100
              message: a widget is at most 100 furlongs
            - rule: self.size >= oldSelf.size
              message: a widget never shrinks
            properties:
              size:
                type: integer
                description: How big the widget is, in furlongs.
              color:
                type: string
                description: The colour of the widget.
          status:
            type: object
            properties:
              phase:
                type: string
";

const WIDGET: &str = r"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
  color: red
";

// ---------------------------------------------------------------------------------------------
// Command groups
// ---------------------------------------------------------------------------------------------

/// `get` in every output format, with label selectors, `--show-labels` and `-A`.
fn get_formats(k: &Kubectl) {
    let f = k.file("fixtures.yaml", GET_FIXTURES);
    assert_eq!(
        lines(&k.ok(&["apply", "-f", &f])),
        [
            "namespace/other created",
            "configmap/cm1 created",
            "configmap/cm2 created",
            "configmap/cm3 created"
        ]
    );

    // The default Table.
    let out = k.ok(&["get", "configmaps"]);
    let t = table(&out);
    assert_eq!(t[0], ["NAME", "DATA", "AGE"], "{out}");
    let names: Vec<_> = t[1..].iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(names, [("cm1", "1"), ("cm2", "2")], "{out}");
    let out = k.ok(&["get", "cm", "-o", "wide"]);
    assert_eq!(table(&out)[0], ["NAME", "DATA", "AGE"], "{out}");

    // Structured output.
    let yaml = k.ok(&["get", "cm", "cm1", "-o", "yaml"]);
    for want in [
        "apiVersion: v1",
        "kind: ConfigMap",
        "  name: cm1",
        "  namespace: default",
        "  a: \"1\"",
        "    app: web",
    ] {
        assert!(yaml.lines().any(|l| l == want), "no {want:?} in:\n{yaml}");
    }
    let cm = k.json(&["get", "cm", "cm1"]);
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["data"]["a"], "1");
    assert_eq!(cm["metadata"]["labels"]["app"], "web");
    assert!(
        cm["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    let list = k.json(&["get", "cm"]);
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    assert_eq!(
        k.ok(&["get", "cm", "-o", "name"]),
        "configmap/cm1\nconfigmap/cm2\n"
    );
    assert_eq!(
        k.ok(&["get", "cm", "-o", "jsonpath={.items[*].metadata.name}"]),
        "cm1 cm2"
    );
    assert_eq!(k.ok(&["get", "cm", "cm2", "-o", "jsonpath={.data.b}"]), "3");
    let out = k.ok(&[
        "get",
        "cm",
        "-o",
        "custom-columns=NAME:.metadata.name,A:.data.a,APP:.metadata.labels.app",
    ]);
    assert_eq!(
        table(&out),
        [
            vec!["NAME", "A", "APP"],
            vec!["cm1", "1", "web"],
            vec!["cm2", "2", "<none>"]
        ]
    );

    // Labels.
    let out = k.ok(&["get", "cm", "--show-labels"]);
    assert_eq!(table(&out)[0], ["NAME", "DATA", "AGE", "LABELS"], "{out}");
    assert_eq!(row(&out, "cm1").last(), Some(&"app=web"), "{out}");
    assert_eq!(row(&out, "cm2").last(), Some(&"<none>"), "{out}");
    assert_eq!(
        k.ok(&["get", "cm", "-l", "app=web", "-o", "name"]),
        "configmap/cm1\n"
    );
    assert_eq!(
        k.ok(&["get", "cm", "-l", "app!=web", "-o", "name"]),
        "configmap/cm2\n"
    );

    // Across namespaces.
    let out = k.ok(&["get", "cm", "-A"]);
    let t = table(&out);
    assert_eq!(t[0], ["NAMESPACE", "NAME", "DATA", "AGE"], "{out}");
    let rows: Vec<_> = t[1..].iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        rows,
        [("default", "cm1"), ("default", "cm2"), ("other", "cm3")],
        "{out}"
    );
    let out = k.ok(&["get", "cm", "-A", "-l", "app=web"]);
    let rows: Vec<_> = table(&out)[1..].iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(rows, [("default", "cm1"), ("other", "cm3")], "{out}");
    assert_eq!(
        k.ok(&["get", "cm", "-n", "other", "-o", "name"]),
        "configmap/cm3\n"
    );

    // Namespaces themselves, and a miss.
    let out = k.ok(&["get", "ns", "other"]);
    assert_eq!(
        table(&out),
        [
            vec!["NAME", "STATUS", "AGE"],
            vec!["other", "Active", row(&out, "other")[2]]
        ]
    );
    let out = k.fails(&["get", "cm", "nope"]);
    assert!(
        out.stderr
            .contains(r#"Error from server (NotFound): configmaps "nope" not found"#),
        "{out}"
    );
}

/// `api-resources` and `api-versions` list the built-in types.
fn api_resources(k: &Kubectl) {
    let out = k.ok(&["api-resources"]);
    assert_eq!(
        table(&out)[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    assert_eq!(
        row(&out, "configmaps")[1..],
        ["cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row(&out, "namespaces")[1..],
        ["ns", "v1", "false", "Namespace"]
    );
    assert_eq!(
        row(&out, "deployments")[1..],
        ["deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        row(&out, "customresourcedefinitions")[1..],
        [
            "crd,crds",
            "apiextensions.k8s.io/v1",
            "false",
            "CustomResourceDefinition"
        ]
    );
    let names = k.ok(&["api-resources", "-o", "name"]);
    for want in ["configmaps", "deployments.apps", "namespaces"] {
        assert!(names.lines().any(|l| l == want), "no {want} in:\n{names}");
    }
    let cluster = k.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(cluster.lines().any(|l| l == "namespaces"), "{cluster}");
    assert!(!cluster.lines().any(|l| l == "configmaps"), "{cluster}");
    let versions = k.ok(&["api-versions"]);
    for want in ["v1", "apps/v1", "apiextensions.k8s.io/v1"] {
        assert!(
            versions.lines().any(|l| l == want),
            "no {want} in:\n{versions}"
        );
    }
}

/// Client-side apply (twice: `unchanged`), `create -f` of several documents, and server-side
/// apply with a conflict and with `--force-conflicts`.
fn apply(k: &Kubectl) {
    let f = k.file("app-config.yaml", APP_CONFIG);
    assert_eq!(k.ok(&["apply", "-f", &f]), "configmap/app-config created\n");
    assert_eq!(
        k.ok(&["apply", "-f", &f]),
        "configmap/app-config unchanged\n"
    );
    let changed = k.file(
        "app-config-2.yaml",
        &APP_CONFIG.replace("a: \"1\"", "a: \"2\""),
    );
    assert_eq!(
        k.ok(&["apply", "-f", &changed]),
        "configmap/app-config configured\n"
    );
    assert_eq!(
        k.ok(&["get", "cm", "app-config", "-o", "jsonpath={.data.a}"]),
        "2"
    );

    // Several documents in one file.
    let multi = k.file("multi.yaml", MULTI);
    assert_eq!(
        lines(&k.ok(&["create", "-f", &multi])),
        [
            "configmap/m1 created",
            "configmap/m2 created",
            "secret/s1 created"
        ]
    );
    assert_eq!(
        k.ok(&["get", "cm", "m1", "m2", "-o", "jsonpath={.items[*].data.k}"]),
        "v1 v2"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "s1",
            "-o",
            "jsonpath={.type} {.data.password}"
        ]),
        "Opaque aHVudGVyMg==",
        "stringData is stored base64-encoded in data"
    );
    let out = k.fails(&["create", "-f", &multi]);
    assert!(
        out.stderr.contains(
            r#"Error from server (AlreadyExists): error when creating "multi.yaml": configmaps "m1" already exists"#
        ),
        "{out}"
    );

    // Server-side apply: a field kubectl-client-side-apply owns is a conflict...
    let ssa = k.file(
        "ssa.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  a: \"9\"\n",
    );
    let out = k.fails(&["apply", "--server-side", "-f", &ssa]);
    assert!(out.stderr.contains("conflict"), "{out}");
    assert!(
        out.stderr.contains(
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a"#
        ),
        "{out}"
    );
    assert!(out.stderr.contains("--force-conflicts"), "{out}");
    assert_eq!(
        k.ok(&["get", "cm", "app-config", "-o", "jsonpath={.data.a}"]),
        "2",
        "a refused apply changes nothing"
    );
    // ...which --force-conflicts takes over.
    assert_eq!(
        k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &ssa]),
        "configmap/app-config serverside-applied\n"
    );
    let cm = k.json(&["get", "cm", "app-config", "--show-managed-fields"]);
    assert_eq!(cm["data"]["a"], "9");
    let managers: Vec<_> = cm["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or(""),
                m["operation"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(managers.contains(&("kubectl", "Apply")), "{managers:?}");
    // Server-side apply creates, and re-applying the same is fine.
    let fresh = k.file(
        "fresh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\ndata:\n  x: \"1\"\n",
    );
    for _ in 0..2 {
        assert_eq!(
            k.ok(&["apply", "--server-side", "-f", &fresh]),
            "configmap/fresh serverside-applied\n"
        );
    }
}

/// `label`, `annotate` and `replace`.
fn label_annotate_replace(k: &Kubectl) {
    let f = k.file("app-config.yaml", APP_CONFIG);
    k.ok(&["create", "-f", &f]);
    assert_eq!(
        k.ok(&["label", "cm", "app-config", "tier=fe"]),
        "configmap/app-config labeled\n"
    );
    let out = k.fails(&["label", "cm", "app-config", "tier=be"]);
    assert!(
        out.stderr
            .contains("'tier' already has a value (fe), and --overwrite is false"),
        "{out}"
    );
    assert_eq!(
        k.ok(&["label", "cm", "app-config", "tier=be", "--overwrite"]),
        "configmap/app-config labeled\n"
    );
    // kubectl 1.27 itself prints "annotate" (its own typo, fixed in 1.28).
    let annotated = if k.minor < 28 {
        "annotate"
    } else {
        "annotated"
    };
    assert_eq!(
        k.ok(&["annotate", "cm", "app-config", "note=hello"]),
        format!("configmap/app-config {annotated}\n")
    );
    assert_eq!(
        k.ok(&[
            "get",
            "cm",
            "app-config",
            "-o",
            "jsonpath={.metadata.labels.tier} {.metadata.annotations.note}"
        ]),
        "be hello"
    );
    assert_eq!(
        k.ok(&["label", "cm", "app-config", "tier-"]),
        "configmap/app-config unlabeled\n"
    );
    assert_eq!(
        k.ok(&["get", "cm", "-l", "tier", "-o", "name"]),
        "",
        "the label is gone"
    );

    // replace without a resourceVersion: kubectl fills in the live one.
    let replaced = k.file(
        "replace.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  a: \"replaced\"\n",
    );
    let before = k.json(&["get", "cm", "app-config"]);
    assert_eq!(
        k.ok(&["replace", "-f", &replaced]),
        "configmap/app-config replaced\n"
    );
    let after = k.json(&["get", "cm", "app-config"]);
    assert_eq!(after["data"]["a"], "replaced");
    assert_eq!(
        after["metadata"]["labels"],
        Value::Null,
        "replace sends the whole object"
    );
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    // replace with a stale resourceVersion is a conflict.
    let mut stale = before.clone();
    stale["data"]["a"] = "stale".into();
    let stale = k.file("stale.json", &stale.to_string());
    let out = k.fails(&["replace", "-f", &stale]);
    assert!(
        out.stderr.contains(
            r#"Error from server (Conflict): error when replacing "stale.json": Operation cannot be fulfilled on configmaps "app-config": the object has been modified; please apply your changes to the latest version and try again"#
        ),
        "{out}"
    );
}

/// A CRD's lifecycle: its kind appears in discovery, CRs print its printer columns, explain
/// reads its schema, strategic merge patch is refused, and deleting it removes the kind.
fn crd_lifecycle(k: &Kubectl) {
    let out = k.ok(&["api-resources", "--api-group=example.com", "-o", "name"]);
    assert_eq!(out, "", "no example.com types yet");
    let crd = k.file("crd.yaml", WIDGET_CRD);
    assert_eq!(
        k.ok(&["apply", "-f", &crd]),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created\n"
    );
    let out = k.ok(&["api-resources", "--api-group=example.com"]);
    assert_eq!(
        row(&out, "widgets")[1..],
        ["wd", "example.com/v1", "true", "Widget"],
        "{out}"
    );
    let out = k.ok(&["get", "crd"]);
    assert_eq!(table(&out)[0], ["NAME", "CREATED", "AT"], "{out}");
    assert_eq!(row(&out, "widgets.example.com").len(), 2, "{out}");

    let w = k.file("w1.yaml", WIDGET);
    assert_eq!(
        k.ok(&["create", "-f", &w]),
        "widget.example.com/w1 created\n"
    );
    let out = k.ok(&["get", "widgets"]);
    let t = table(&out);
    assert_eq!(t[0], ["NAME", "SIZE", "AGE"], "{out}");
    assert_eq!(t[1][..2], ["w1", "3"], "{out}");
    let out = k.ok(&["get", "wd", "-o", "wide"]);
    let t = table(&out);
    assert_eq!(t[0], ["NAME", "SIZE", "COLOR", "AGE"], "{out}");
    assert_eq!(t[1][..3], ["w1", "3", "red"], "{out}");
    assert_eq!(
        k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.color}"]),
        "red"
    );

    // explain reads the CRD's schema.
    let out = k.ok(&["explain", "widget.spec.size"]);
    assert!(out.contains("KIND:       Widget"), "{out}");
    assert!(out.contains("FIELD: size <integer>"), "{out}");
    assert!(out.contains("How big the widget is, in furlongs."), "{out}");
    let out = k.ok(&["explain", "widgets.spec"]);
    assert!(out.contains("The desired shape of the widget."), "{out}");
    assert!(out.contains("color\t<string>"), "{out}");

    // Unknown fields: refused under kubectl's default (Strict) validation.
    let bad = k.file(
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  size: 1\n  bogus: true\n",
    );
    let out = k.fails(&["create", "-f", &bad]);
    assert!(
        out.stderr
            .contains(r#"strict decoding error: unknown field "spec.bogus""#),
        "{out}"
    );

    // CEL rules (x-kubernetes-validations), a transition rule among them, worded as
    // kube-apiserver words them.
    let out = k.fails(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":101}}"#,
    ]);
    assert!(
        out.stderr.contains(
            r#"The Widget "w1" is invalid: spec: Invalid value: "object": a widget is at most 100 furlongs"#
        ),
        "{out}"
    );
    let out = k.fails(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":2}}"#,
    ]);
    assert!(
        out.stderr.contains(
            r#"The Widget "w1" is invalid: spec: Invalid value: "object": a widget never shrinks"#
        ),
        "{out}"
    );
    // A rule that does not compile is refused with the CRD, as kube-apiserver refuses it.
    let broken = k.file(
        "gadgets.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-validations:\n            - rule: 'self.size >'\n",
    );
    let out = k.fails(&["apply", "-f", &broken]);
    assert!(
        out.stderr.contains(
            r#"The CustomResourceDefinition "gadgets.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.size >": compilation failed"#
        ),
        "{out}"
    );

    // Patches: strategic merge is not for custom resources.
    let out = k.fails(&["patch", "widget", "w1", "-p", r#"{"spec":{"size":4}}"#]);
    assert!(
        out.stderr.contains(
            "error: application/strategic-merge-patch+json is not supported by example.com/v1, Kind=Widget: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        ),
        "{out}"
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":4}}"#
        ]),
        "widget.example.com/w1 patched\n"
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "widget",
            "w1",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/color","value":"blue"}]"#
        ]),
        "widget.example.com/w1 patched\n"
    );
    let out = k.ok(&["get", "widgets", "-o", "wide"]);
    assert_eq!(table(&out)[1][..3], ["w1", "4", "blue"], "{out}");

    // Deleting the CRD removes the kind.
    assert_eq!(
        k.ok(&["delete", "crd", "widgets.example.com"]),
        "customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted\n"
    );
    // kubectl still has the type in its discovery cache, so its first try lists the path the
    // server no longer serves (as against any cluster)...
    let out = k.fails(&["get", "widgets"]);
    assert!(
        out.stderr.contains(
            r#"Error from server (NotFound): Unable to list "example.com/v1, Resource=widgets": the server could not find the requested resource"#
        ),
        "{out}"
    );
    // ...and fresh discovery no longer has it.
    let out = k.ok(&["api-resources", "--api-group=example.com", "-o", "name"]);
    assert_eq!(out, "", "the kind is gone from discovery");
    let out = k.fails(&["get", "widgets"]);
    assert!(
        out.stderr
            .contains(r#"error: the server doesn't have a resource type "widgets""#),
        "{out}"
    );
}

/// Deployments: imperative create, `-o wide`, `scale`, `set image`, `rollout status` and
/// `wait --for=condition=Available`.
fn deployments(k: &Kubectl) {
    assert_eq!(
        k.ok(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2"
        ]),
        "deployment.apps/web created\n"
    );
    let out = k.ok(&["get", "deploy", "web"]);
    let t = table(&out);
    assert_eq!(
        t[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{out}"
    );
    assert_eq!(t[1][..4], ["web", "2/2", "2", "2"], "{out}");
    let out = k.ok(&["get", "deployments", "-o", "wide"]);
    let t = table(&out);
    assert_eq!(
        t[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    assert_eq!(t[1][5..], ["nginx", "nginx:1.27", "app=web"], "{out}");

    assert_eq!(
        k.ok(&["rollout", "status", "deployment/web"]),
        "deployment \"web\" successfully rolled out\n"
    );
    assert_eq!(
        k.ok(&[
            "wait",
            "--for=condition=Available",
            "deploy/web",
            "--timeout=60s"
        ]),
        "deployment.apps/web condition met\n"
    );

    assert_eq!(
        k.ok(&["scale", "deploy/web", "--replicas=3"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.status.readyReplicas} {.metadata.generation} {.status.observedGeneration}"
        ]),
        "3 3 2 2"
    );
    let out = k.fails(&[
        "scale",
        "deploy/web",
        "--current-replicas=2",
        "--replicas=5",
    ]);
    assert!(
        out.stderr.contains("Expected replicas to be 2, was 3"),
        "{out}"
    );
    assert_eq!(
        k.ok(&["set", "image", "deploy/web", "nginx=nginx:1.28"]),
        "deployment.apps/web image updated\n"
    );
    assert_eq!(
        k.ok(&["rollout", "status", "deploy/web"]),
        "deployment \"web\" successfully rolled out\n"
    );
    let out = k.ok(&["get", "deploy", "web", "-o", "wide"]);
    assert_eq!(row(&out, "web")[1..4], ["3/3", "3", "3"], "{out}");
    assert_eq!(row(&out, "web")[6], "nginx:1.28", "{out}");
}

/// `create configmap|secret|namespace|deployment`: kubectl ≥ 1.32 sends these as protobuf,
/// older clients as JSON; both are stored the same.
fn create_imperative(k: &Kubectl) {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "create",
                "configmap",
                "cfg",
                "--from-literal=k=v",
                "--from-literal=n=1",
            ],
            "configmap/cfg created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "creds",
                "--from-literal=password=hunter2",
            ],
            "secret/creds created",
        ),
        (&["create", "namespace", "team"], "namespace/team created"),
        (
            &[
                "create",
                "deployment",
                "api",
                "--image=nginx:1.27",
                "--replicas=2",
                "--port=80",
            ],
            "deployment.apps/api created",
        ),
    ];
    let protobuf = "Content-Type: application/vnd.kubernetes.protobuf";
    for (args, printed) in cases {
        // -v=8 logs the request headers (to stderr).
        let mut verbose = args.to_vec();
        verbose.push("-v=8");
        let out = k.run(&verbose);
        assert_eq!(out.code, Some(0), "{}:\n{out}", k.describe(args));
        assert_eq!(out.stdout, format!("{printed}\n"));
        assert_eq!(
            out.stderr.contains(protobuf),
            k.minor >= 32,
            "kubectl 1.{} {}: protobuf request body expected only from 1.32 on:\n{}",
            k.minor,
            args.join(" "),
            out.stderr
        );
    }
    assert_eq!(
        k.ok(&["get", "cm", "cfg", "-o", "jsonpath={.data.k} {.data.n}"]),
        "v 1"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "creds",
            "-o",
            "jsonpath={.type} {.data.password}"
        ]),
        "Opaque aHVudGVyMg=="
    );
    let out = k.ok(&["get", "secret", "creds"]);
    assert_eq!(table(&out)[0], ["NAME", "TYPE", "DATA", "AGE"], "{out}");
    assert_eq!(row(&out, "creds")[1..3], ["Opaque", "1"], "{out}");
    let out = k.ok(&["get", "ns", "team"]);
    assert_eq!(row(&out, "team")[1], "Active", "{out}");
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "api",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.selector.matchLabels.app}"
        ]),
        "2 nginx:1.27 80 api"
    );
    // Into another namespace, and a duplicate.
    assert_eq!(
        k.ok(&[
            "create",
            "configmap",
            "cfg",
            "-n",
            "team",
            "--from-literal=x=y"
        ]),
        "configmap/cfg created\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "cm",
            "-A",
            "-o",
            "custom-columns=NS:.metadata.namespace,NAME:.metadata.name",
            "--no-headers"
        ]),
        "default   cfg\nteam      cfg\n"
    );
    let out = k.fails(&["create", "configmap", "cfg", "--from-literal=k=v"]);
    assert!(
        out.stderr
            .contains(r#"error: failed to create configmap: configmaps "cfg" already exists"#),
        "{out}"
    );
}

/// Whether `want` is contained in `got`: every field of `want` present in `got` with a value that
/// contains it (lists element by element); `got` may hold more (what the server fills in).
/// `null` in `want` (kubectl's `creationTimestamp: null`) asks for nothing.
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (_, Value::Null) => true,
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| wv.is_null() || g.get(k).is_some_and(|gv| contains(gv, wv))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(gv, wv)| contains(gv, wv))
        }
        (g, w) => g == w,
    }
}

/// Every `kubectl create <subcommand>` for a built-in kind. kubectl ≥ 1.32 sends each as
/// protobuf, older clients as JSON; either way the stored object holds everything kubectl built,
/// which `--dry-run=client -o json` prints without sending it.
fn create_every_kind(k: &Kubectl) {
    // A key pair for `create secret tls`, made by the real openssl.
    let openssl = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=shop.example.com",
            "-keyout",
            "tls.key",
            "-out",
            "tls.crt",
        ])
        .current_dir(&k.dirs.work)
        .output()
        .expect("openssl is needed by this test");
    assert!(
        openssl.status.success(),
        "{}",
        String::from_utf8_lossy(&openssl.stderr)
    );
    let cases: &[(&str, &[&str])] = &[
        (
            "job/j",
            &[
                "create",
                "job",
                "j",
                "--image=busybox",
                "--",
                "sh",
                "-c",
                "echo hi",
            ],
        ),
        (
            "cronjob/cj",
            &[
                "create",
                "cronjob",
                "cj",
                "--image=busybox",
                "--schedule=*/5 * * * *",
                "--restart=OnFailure",
                "--",
                "date",
            ],
        ),
        (
            "role/r",
            &[
                "create",
                "role",
                "r",
                "--verb=get",
                "--verb=list",
                "--resource=pods",
                "--resource=deployments.apps",
                "--resource-name=web",
            ],
        ),
        (
            "rolebinding/rb",
            &[
                "create",
                "rolebinding",
                "rb",
                "--role=r",
                "--user=alice",
                "--group=devs",
                "--serviceaccount=default:builder",
            ],
        ),
        (
            "clusterrole/cr",
            &[
                "create",
                "clusterrole",
                "cr",
                "--verb=get",
                "--resource=namespaces",
            ],
        ),
        (
            "clusterrolebinding/crb",
            &[
                "create",
                "clusterrolebinding",
                "crb",
                "--clusterrole=cr",
                "--user=bob",
            ],
        ),
        (
            "resourcequota/q",
            &[
                "create",
                "quota",
                "q",
                "--hard=cpu=1,memory=1G,pods=2",
                "--scopes=BestEffort",
            ],
        ),
        (
            "priorityclass/pc",
            &[
                "create",
                "priorityclass",
                "pc",
                "--value=1000",
                "--description=high",
                "--preemption-policy=Never",
            ],
        ),
        (
            "ingress/ing",
            &[
                "create",
                "ingress",
                "ing",
                "--class=nginx",
                "--rule=foo.example.com/bar=svc1:8080",
            ],
        ),
        (
            "poddisruptionbudget/pdb",
            &[
                "create",
                "poddisruptionbudget",
                "pdb",
                "--selector=app=web",
                "--min-available=50%",
            ],
        ),
        (
            "service/web",
            &["create", "service", "clusterip", "web", "--tcp=80:8080"],
        ),
        (
            "service/np",
            &[
                "create",
                "service",
                "nodeport",
                "np",
                "--tcp=80:8080",
                "--node-port=30080",
            ],
        ),
        (
            "service/lb",
            &["create", "service", "loadbalancer", "lb", "--tcp=443:8443"],
        ),
        (
            "service/ext",
            &[
                "create",
                "service",
                "externalname",
                "ext",
                "--external-name=db.example.com",
            ],
        ),
        (
            "serviceaccount/builder",
            &["create", "serviceaccount", "builder"],
        ),
        (
            "secret/reg",
            &[
                "create",
                "secret",
                "docker-registry",
                "reg",
                "--docker-server=registry.example.com",
                "--docker-username=u",
                "--docker-password=p",
            ],
        ),
        (
            "secret/tls",
            &[
                "create",
                "secret",
                "tls",
                "tls",
                "--cert=tls.crt",
                "--key=tls.key",
            ],
        ),
    ];
    let protobuf = "Content-Type: application/vnd.kubernetes.protobuf";
    // Flags go before `--`, after which everything is the container's command.
    let with = |args: &[&'static str], flags: &[&'static str]| {
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        [&args[..at], flags, &args[at..]].concat()
    };
    for (object, args) in cases {
        let printed = k.ok(&with(args, &["--dry-run=client", "-o", "json"]));
        let mut built: Value =
            serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{e}: {printed}"));
        // A create sets no status: the server owns it (kube-apiserver resets it too).
        built.as_object_mut().map(|o| o.remove("status"));
        let out = k.run(&with(args, &["-v=8"]));
        assert_eq!(out.code, Some(0), "{}:\n{out}", k.describe(args));
        assert_eq!(
            out.stderr.contains(protobuf),
            k.minor >= 32,
            "{}: protobuf request body expected only from 1.32 on",
            k.describe(args)
        );
        let stored = k.json(&["get", object]);
        assert!(
            contains(&stored, &built),
            "{}: the stored object lacks what kubectl built\nbuilt:  {built}\nstored: {stored}",
            k.describe(args)
        );
    }
    printed_columns(k);
}

/// `kubectl get` of the kinds `create_every_kind` made prints the columns a cluster's printers
/// declare (headers as kubectl writes them; wide columns only with `-o wide`).
fn printed_columns(k: &Kubectl) {
    let headers: &[(&str, &str)] = &[
        ("job/j", "NAME STATUS COMPLETIONS DURATION AGE"),
        (
            "cronjob/cj",
            "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE",
        ),
        ("role/r", "NAME CREATED AT"),
        ("clusterrole/cr", "NAME CREATED AT"),
        ("rolebinding/rb", "NAME ROLE AGE"),
        ("clusterrolebinding/crb", "NAME ROLE AGE"),
        ("resourcequota/q", "NAME AGE REQUEST LIMIT"),
        (
            "priorityclass/pc",
            "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
        ),
        ("ingress/ing", "NAME CLASS HOSTS ADDRESS PORTS AGE"),
        (
            "poddisruptionbudget/pdb",
            "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
        ),
        ("serviceaccount/builder", "NAME SECRETS AGE"),
    ];
    for (object, want) in headers {
        let out = k.ok(&["get", object]);
        let header = out.lines().next().unwrap_or("");
        assert_eq!(
            header.split_whitespace().collect::<Vec<_>>().join(" "),
            *want,
            "kubectl get {object}:\n{out}"
        );
    }
    let words = |args: &[&str]| {
        let out = k.ok(args);
        out.split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        words(&["get", "job/j", "-o", "wide"])[..8],
        [
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let rb = words(&["get", "rolebinding/rb", "-o", "wide", "--no-headers"]);
    assert_eq!(
        [&rb[..2], &rb[3..]].concat(),
        ["rb", "Role/r", "alice", "devs", "default/builder"],
        "{rb:?}"
    );
}

/// `kubectl autoscale`: up to 1.31 it creates an `autoscaling/v1` `HorizontalPodAutoscaler`, from
/// 1.32 a `v2` one (as protobuf); both read the same through either version.
fn autoscale(k: &Kubectl) {
    k.ok(&["create", "deployment", "web", "--image=nginx:1.27"]);
    assert_eq!(
        k.ok(&[
            "autoscale",
            "deployment",
            "web",
            "--min=2",
            "--max=5",
            "--cpu-percent=70"
        ]),
        "horizontalpodautoscaler.autoscaling/web autoscaled\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "jsonpath={.apiVersion} {.spec.minReplicas} {.spec.maxReplicas} {.spec.targetCPUUtilizationPercentage}"
        ]),
        "autoscaling/v1 2 5 70"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-o",
            "jsonpath={.apiVersion} {.spec.metrics[0].resource.name} {.spec.metrics[0].resource.target.averageUtilization}"
        ]),
        "autoscaling/v2 cpu 70"
    );
    // A v1 edit keeps what only v2 holds.
    k.ok(&[
        "patch",
        "horizontalpodautoscalers.v2.autoscaling",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}}}"#,
    ]);
    k.ok(&[
        "patch",
        "horizontalpodautoscalers.v1.autoscaling",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"maxReplicas":7}}"#,
    ]);
    assert_eq!(
        k.ok(&[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-o",
            "jsonpath={.spec.maxReplicas} {.spec.behavior.scaleDown.stabilizationWindowSeconds} {.spec.metrics[0].resource.target.averageUtilization}"
        ]),
        "7 60 70"
    );
}

/// `delete --dry-run=server`, `wait --for=jsonpath=…` and `wait --for=delete`.
fn delete_and_wait(k: &Kubectl) {
    let f = k.file("app-config.yaml", APP_CONFIG);
    k.ok(&["create", "-f", &f]);
    assert_eq!(
        k.ok(&["delete", "cm", "app-config", "--dry-run=server"]),
        "configmap \"app-config\" deleted (server dry run)\n"
    );
    assert_eq!(
        k.ok(&["get", "cm", "app-config", "-o", "name"]),
        "configmap/app-config\n",
        "a dry-run delete keeps the object"
    );

    // wait --for=jsonpath: met at once, and met once a later write satisfies it.
    assert_eq!(
        k.ok(&[
            "wait",
            "--for=jsonpath={.data.a}=1",
            "cm/app-config",
            "--timeout=60s"
        ]),
        "configmap/app-config condition met\n"
    );
    let mut waiter = k.spawn(&[
        "wait",
        "--for=jsonpath={.data.a}=2",
        "cm/app-config",
        "--timeout=60s",
        "-v=6",
    ]);
    // Once its watch is open, kubectl sees every later change.
    waiter.wait_for_line(Stream::Stderr, |l| l.contains("watch=true"));
    k.ok(&["patch", "cm", "app-config", "-p", r#"{"data":{"a":"2"}}"#]);
    let out = waiter.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "configmap/app-config condition met\n");

    // wait --for=delete: a finalizer holds the object until the waiter watches.
    k.ok(&[
        "patch",
        "cm",
        "app-config",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    assert_eq!(
        k.ok(&["delete", "cm", "app-config", "--wait=false"]),
        "configmap \"app-config\" deleted\n"
    );
    let held = k.json(&["get", "cm", "app-config"]);
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "the finalizer keeps it, marked for deletion: {held}"
    );
    let mut waiter = k.spawn(&[
        "wait",
        "--for=delete",
        "cm/app-config",
        "--timeout=60s",
        "-v=6",
    ]);
    waiter.wait_for_line(Stream::Stderr, |l| l.contains("watch=true"));
    k.ok(&[
        "patch",
        "cm",
        "app-config",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let out = waiter.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "configmap/app-config condition met\n");
    let out = k.fails(&["get", "cm", "app-config"]);
    assert!(out.stderr.contains("NotFound"), "{out}");
    // Waiting for the deletion of what is already gone succeeds at once, silently.
    let out = k.run(&["wait", "--for=delete", "cm/app-config", "--timeout=60s"]);
    assert_eq!((out.code, out.stdout.as_str()), (Some(0), ""), "{out}");
}

/// `get -w` prints objects created while it watches, in the list's columns.
fn watch(k: &Kubectl) {
    k.ok(&["create", "configmap", "before", "--from-literal=a=1"]);
    let mut w = k.spawn(&["get", "cm", "-w"]);
    let header = w.wait_for_line(Stream::Stdout, |l| l.starts_with("NAME"));
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"]
    );
    // The list came first; its resourceVersion starts the watch, so nothing after it is missed.
    w.wait_for_line(Stream::Stdout, |l| l.starts_with("before "));
    k.ok(&[
        "create",
        "configmap",
        "during",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let line = w.wait_for_line(Stream::Stdout, |l| l.starts_with("during"));
    assert_eq!(
        line.split_whitespace().take(2).collect::<Vec<_>>(),
        ["during", "2"]
    );
    k.ok(&["delete", "cm", "before"]);
    let line = w.wait_for_line(Stream::Stdout, |l| l.starts_with("before"));
    assert_eq!(
        line.split_whitespace().nth(1),
        Some("1"),
        "the deletion is printed as a row"
    );
    w.kill();
}

/// `diff`: exit code 1 and the changed lines for a difference, 0 and nothing when none.
fn diff(k: &Kubectl) {
    let f = k.file("app-config.yaml", APP_CONFIG);
    k.ok(&["apply", "-f", &f]);
    let out = k.run(&["diff", "-f", &f]);
    assert_eq!((out.code, out.stdout.as_str()), (Some(0), ""), "{out}");

    let changed = k.file("changed.yaml", &APP_CONFIG.replace("a: \"1\"", "a: \"5\""));
    let out = k.run(&["diff", "-f", &changed]);
    assert_eq!(out.code, Some(1), "{out}");
    let l = lines(&out.stdout);
    assert!(l.contains(&"-  a: \"1\""), "{out}");
    assert!(l.contains(&"+  a: \"5\""), "{out}");
    assert!(
        !l.iter().any(|l| l.contains("resourceVersion")),
        "a dry-run update keeps the resourceVersion: {out}"
    );
    assert_eq!(
        k.ok(&["get", "cm", "app-config", "-o", "jsonpath={.data.a}"]),
        "1",
        "diff changes nothing"
    );
    // A new object is all additions.
    let new = k.file("new.yaml", &APP_CONFIG.replace("app-config", "brand-new"));
    let out = k.run(&["diff", "-f", &new]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(lines(&out.stdout).contains(&"+  name: brand-new"), "{out}");
    assert!(
        !lines(&out.stdout).iter().any(|l| l.starts_with("-  ")),
        "{out}"
    );
    k.fails(&["get", "cm", "brand-new"]);
    // Server-side diff.
    let out = k.run(&["diff", "--server-side", "--force-conflicts", "-f", &changed]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(lines(&out.stdout).contains(&"+  a: \"5\""), "{out}");
}

/// `edit` with an editor that changes a value, and one that changes nothing.
fn edit(k: &Kubectl) {
    let f = k.file("app-config.yaml", APP_CONFIG);
    k.ok(&["create", "-f", &f]);
    let editor = k.dirs.work.join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/a: \"1\"/a: \"edited\"/' \"$1\"\n",
    )
    .expect("write the editor script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755))
            .expect("make the editor executable");
    }
    let editor = editor.to_str().expect("a UTF-8 temp path");
    let out = k.run_env(&["edit", "cm", "app-config"], &[("KUBE_EDITOR", editor)]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "configmap/app-config edited\n");
    assert_eq!(
        k.ok(&["get", "cm", "app-config", "-o", "jsonpath={.data.a}"]),
        "edited"
    );
    let out = k.run_env(&["edit", "cm", "app-config"], &[("KUBE_EDITOR", "true")]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stderr.contains("Edit cancelled, no changes made."),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// One test per (command group, version)
// ---------------------------------------------------------------------------------------------

/// `describe` of built-in kinds and of a custom resource: kubectl lists the object's events with
/// `involvedObject.*` field selectors, and shows them.
fn describe(k: &Kubectl) {
    let fixtures = k.file("fixtures.yaml", GET_FIXTURES);
    k.ok(&["apply", "-f", &fixtures]);
    let cm = k.json(&["get", "configmap", "cm1"]);
    let uid = cm["metadata"]["uid"].as_str().expect("uid").to_string();
    let event = format!(
        r"apiVersion: v1
kind: Event
metadata:
  name: cm1.seen
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: cm1
  namespace: default
  uid: {uid}
reason: Inspected
message: looked at by a test
type: Normal
source:
  component: backflow-test
"
    );
    let event = k.file("event.yaml", &event);
    k.ok(&["apply", "-f", &event]);
    let out = k.ok(&["describe", "configmap", "cm1"]);
    assert!(out.contains("cm1") && out.contains("app=web"), "{out}");
    assert!(
        out.contains("Inspected") && out.contains("looked at by a test"),
        "the object's events are shown:\n{out}"
    );
    // Another object's description lists none of them.
    let out = k.ok(&["describe", "configmap", "cm2"]);
    assert!(!out.contains("Inspected"), "{out}");
    let out = k.ok(&["describe", "namespace", "other"]);
    assert!(out.contains("other"), "{out}");
    let crd = k.file("crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ]);
    let widget = k.file("widget.yaml", WIDGET);
    k.ok(&["apply", "-f", &widget]);
    let out = k.ok(&["describe", "widget", "w1"]);
    assert!(out.contains("w1") && out.contains("red"), "{out}");
    // kubectl get events shows kube-apiserver's columns.
    let out = k.ok(&["get", "events"]);
    let header: Vec<&str> = lines(&out)[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    assert!(
        out.contains("Normal") && out.contains("Inspected") && out.contains("configmap/cm1"),
        "{out}"
    );
    events_v1(k);
}

/// An Event written through `events.k8s.io/v1` (as client-go's `tools/events` recorder writes
/// them) is the same object as a core Event: listed by `kubectl get events`, `kubectl events`
/// and `describe`, selected by `regarding.*`, and refused with kube-apiserver's causes when a
/// field that API requires is missing.
fn events_v1(k: &Kubectl) {
    // kubectl describe selects an object's events by its uid too.
    let uid = k.json(&["get", "configmap", "cm1"])["metadata"]["uid"].clone();
    let uid = uid.as_str().expect("a uid");
    let event = k.file(
        "event-v1.yaml",
        &format!(
            "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: cm1.v1
eventTime: \"2026-12-06T10:00:00.000000Z\"
reportingController: backflow.dev/operator
reportingInstance: replica-a
action: Write
reason: LiveValueKept
type: Normal
regarding:
  apiVersion: v1
  kind: ConfigMap
  name: cm1
  namespace: default
  uid: {uid}
note: the live value of data.a was kept
"
        ),
    );
    k.ok(&["create", "-f", &event]);
    let core = k.json(&["get", "events", "cm1.v1"]);
    assert_eq!(core["apiVersion"], "v1", "{core}");
    assert_eq!(core["involvedObject"]["name"], "cm1", "{core}");
    assert_eq!(
        core["message"], "the live value of data.a was kept",
        "{core}"
    );
    assert_eq!(
        core["reportingComponent"], "backflow.dev/operator",
        "{core}"
    );
    let v1 = k.json(&["get", "events.v1.events.k8s.io", "cm1.v1"]);
    assert_eq!(v1["regarding"]["kind"], "ConfigMap", "{v1}");
    assert_eq!(v1["note"], "the live value of data.a was kept", "{v1}");
    assert!(v1.get("message").is_none(), "{v1}");
    // A merge patch through either API changes the one object.
    k.ok(&[
        "patch",
        "events.v1.events.k8s.io",
        "cm1.v1",
        "--type=merge",
        "-p",
        r#"{"series":{"count":4,"lastObservedTime":"2026-12-06T10:05:00.000000Z"}}"#,
    ]);
    assert_eq!(k.json(&["get", "events", "cm1.v1"])["series"]["count"], 4);
    let out = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=cm1",
    ]);
    assert!(
        out.lines()
            .any(|l| l.contains("LiveValueKept") && l.contains("configmap/cm1")),
        "{out}"
    );
    let selected = k.ok(&[
        "get",
        "events.v1.events.k8s.io",
        "--field-selector",
        "regarding.name=cm1,reportingController=backflow.dev/operator",
        "-o",
        "name",
    ]);
    assert_eq!(
        lines(&selected),
        ["event.events.k8s.io/cm1.v1"],
        "{selected}"
    );
    let out = k.ok(&["events", "--for", "configmap/cm1"]);
    assert!(out.contains("LiveValueKept"), "{out}");
    let out = k.ok(&["describe", "configmap", "cm1"]);
    assert!(out.contains("the live value of data.a was kept"), "{out}");
    // What events.k8s.io/v1 requires, refused with each field named; nothing is stored.
    let bad = k.file(
        "event-bad.yaml",
        "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: cm1.bad
type: Sometimes
regarding:
  kind: ConfigMap
  name: cm1
",
    );
    let out = k.fails(&["create", "-f", &bad]);
    for field in [
        "eventTime: Required value",
        "reportingController: Required value",
        "action: Required value",
        "type: Unsupported value: \"Sometimes\"",
    ] {
        assert!(out.stderr.contains(field), "{field}:\n{out}");
    }
    k.fails(&["get", "events", "cm1.bad"]);
}

/// `kubectl explain` of every served built-in kind and of nested fields, from the schemas the
/// server publishes (generated from Kubernetes' definitions), and of a custom resource's metadata.
fn explain(k: &Kubectl) {
    let out = k.ok(&["explain", "deployment.spec.template.spec.containers.ports"]);
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("FIELD: ports <[]ContainerPort>"), "{out}");
    assert!(out.contains("containerPort\t<integer> -required-"), "{out}");
    assert!(out.contains("protocol\t<string>"), "{out}");
    let out = k.ok(&["explain", "pods.spec.restartPolicy"]);
    assert!(
        out.contains("Restart policy for all containers within the pod."),
        "{out}"
    );
    let out = k.ok(&["explain", "hpa", "--api-version=autoscaling/v1"]);
    assert!(out.contains("VERSION:    v1"), "{out}");
    assert!(out.contains("spec\t<HorizontalPodAutoscalerSpec>"), "{out}");
    let out = k.ok(&["explain", "services.spec.ports.targetPort"]);
    assert!(out.contains("FIELD: targetPort <IntOrString>"), "{out}");

    let resources = k.ok(&["api-resources", "-o", "name"]);
    let resources = lines(&resources);
    assert!(resources.len() >= 30, "{resources:?}");
    let versions = k.ok(&["api-versions"]);
    for resource in resources {
        // `explain events.events.k8s.io` would read `.io` as a field of core `events`: a
        // group's resource is named by its --api-version.
        let out = match resource.split_once('.') {
            Some((plural, group)) => {
                let version = lines(&versions)
                    .into_iter()
                    .find(|v| v.rsplit_once('/').is_some_and(|(g, _)| g == group))
                    .unwrap_or_else(|| panic!("no version of {group} in:\n{versions}"));
                k.ok(&["explain", plural, &format!("--api-version={version}")])
            }
            None => k.ok(&["explain", resource]),
        };
        assert!(
            out.contains("DESCRIPTION:") && out.contains("metadata\t<ObjectMeta>"),
            "explain {resource}:\n{out}"
        );
    }

    let crd = k.file("crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ]);
    let out = k.ok(&["explain", "widget.metadata.labels"]);
    assert!(out.contains("FIELD: labels <map[string]string>"), "{out}");

    // The v2 document, as JSON, for tools that read it (openapi2jsonschema and the like).
    let swagger: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"]))
        .expect("the v2 document is JSON");
    let definitions = &swagger["definitions"];
    assert_eq!(
        definitions["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    assert_eq!(
        definitions["com.example.v1.Widget"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
}

/// One object of each built-in kind `create_every_kind` does not make, for `describe_every_kind`.
const EVERY_OTHER_KIND: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27", ports: [{containerPort: 80}]}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:16"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "busybox"}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: rs, image: "busybox"}]}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: db-1}
revision: 1
data: {spec: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {app: solo}}
spec: {containers: [{name: solo, image: "busybox"}]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 8080}]}]
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec: {limits: [{type: Container, default: {cpu: 500m}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: example.com/ingress}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: a, leaseDurationSeconds: 15}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: example.com/disk
---
apiVersion: v1
kind: Event
metadata: {name: web.started}
involvedObject: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}
reason: Started
message: started by a test
type: Normal
"#;

/// `kubectl describe` of every served kind (each has an object here): each describer's extra
/// reads (a Deployment's `ReplicaSets`, a Service's Endpoints, a namespace's quotas, every
/// object's events by field selector) are answered, and the fields describers dereference
/// (a `StatefulSet`'s `replicas`, set by kube-apiserver's defaults) are there.
fn describe_every_kind(k: &Kubectl) {
    create_every_kind(k);
    let others = k.file("others.yaml", EVERY_OTHER_KIND);
    k.ok(&["apply", "-f", &others]);
    let crd = k.file("crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ]);
    let widget = k.file("widget.yaml", WIDGET);
    k.ok(&["apply", "-f", &widget]);
    let mut described = 0;
    for resource in lines(&k.ok(&["api-resources", "--verbs=get", "-o", "name"])) {
        if resource.ends_with(".backflow.dev") {
            continue;
        }
        let out = k.ok(&["describe", resource, "--all-namespaces"]);
        assert!(
            out.lines().any(|l| l.starts_with("Name:")),
            "kubectl describe {resource}: no object of this kind, or its description is empty:\n{out}"
        );
        described += 1;
    }
    assert!(described >= 32, "{described} kinds described");
    // A description names its object.
    for object in [
        "statefulset/db",
        "job/j",
        "service/web",
        "horizontalpodautoscaler/web",
    ] {
        let out = k.ok(&["describe", object]);
        let name = object.split_once('/').map_or(object, |(_, n)| n);
        assert!(
            out.lines()
                .any(|l| l.starts_with("Name:") && l.split_whitespace().nth(1) == Some(name)),
            "kubectl describe {object}:\n{out}"
        );
    }
}

/// `kubectl auth can-i` (`SelfSubjectAccessReview` and, with `--list`, `SelfSubjectRulesReview`)
/// and `kubectl create token` (`TokenRequest`).
fn auth_and_token(k: &Kubectl) {
    assert_eq!(
        k.ok(&["auth", "can-i", "create", "deployments"]).trim(),
        "yes"
    );
    let rules = k.ok(&["auth", "can-i", "--list"]);
    assert!(
        rules
            .lines()
            .next()
            .is_some_and(|h| h.starts_with("Resources")),
        "{rules}"
    );
    assert!(rules.contains("*.*"), "every verb on everything: {rules}");
    k.ok(&["create", "serviceaccount", "builder"]);
    let token = k.ok(&["create", "token", "builder", "--duration", "15m"]);
    let token = token.trim();
    assert!(
        !token.is_empty() && !token.contains(char::is_whitespace),
        "{token:?}"
    );
    // The token's use is shown over TLS with authentication on (kubectl sends no token over
    // plain HTTP): see the authorship tests.
    let out = k.fails(&["create", "token", "nobody"]);
    assert!(
        out.stderr.contains(r#"serviceaccounts "nobody" not found"#),
        "{out}"
    );
}

macro_rules! per_version {
    ($($group:ident),* $(,)?) => {
        mod v1_27 { $( #[test] fn $group() { super::run("1.27", super::$group); } )* }
        mod v1_28 { $( #[test] fn $group() { super::run("1.28", super::$group); } )* }
        mod v1_29 { $( #[test] fn $group() { super::run("1.29", super::$group); } )* }
        mod v1_30 { $( #[test] fn $group() { super::run("1.30", super::$group); } )* }
        mod v1_31 { $( #[test] fn $group() { super::run("1.31", super::$group); } )* }
        mod v1_32 { $( #[test] fn $group() { super::run("1.32", super::$group); } )* }
        mod v1_33 { $( #[test] fn $group() { super::run("1.33", super::$group); } )* }
    };
}

per_version!(
    get_formats,
    api_resources,
    apply,
    label_annotate_replace,
    crd_lifecycle,
    deployments,
    create_imperative,
    create_every_kind,
    autoscale,
    delete_and_wait,
    watch,
    diff,
    edit,
    describe,
    describe_every_kind,
    explain,
    auth_and_token,
);
