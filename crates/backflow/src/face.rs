//! `backflow history`, `backflow why` and `backflow diff`: what people see of an object and a
//! folder, asked of the `serve` whose API the kubeconfig names (its `/backflow/v1/` endpoints,
//! behind the API's authentication) and printed as text or JSON.

use std::process::ExitCode;

use backflow_face::{FolderDiff, ObjectRef, Story, Why, render};
use clap::Args;
use kube::Client;
use kube::discovery::{Discovery, Scope};

use crate::connect::{ClientArgs, runtime};
use crate::output;

/// Short names kubectl users type, for the built-in kinds discovery does not name them for.
const SHORT_NAMES: &[(&str, &str)] = &[
    ("cm", "configmaps"),
    ("deploy", "deployments"),
    ("ds", "daemonsets"),
    ("ing", "ingresses"),
    ("ns", "namespaces"),
    ("netpol", "networkpolicies"),
    ("pvc", "persistentvolumeclaims"),
    ("rs", "replicasets"),
    ("sa", "serviceaccounts"),
    ("sts", "statefulsets"),
    ("svc", "services"),
];

/// `backflow history` and `backflow why`.
#[derive(Debug, Args)]
pub(crate) struct ObjectArgs {
    /// The object: `KIND/NAME` (`configmap/demo`, `deployments.apps/web`, `cm/demo`).
    object: String,
    /// Its namespace (`default` for a namespaced kind when not given).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    #[command(flatten)]
    ask: AskArgs,
}

/// `backflow diff`.
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// Only this `GitTarget` (`NAMESPACE/NAME`); every one by default.
    target: Option<String>,
    #[command(flatten)]
    ask: AskArgs,
}

/// Whom the verbs ask, and how they print the answer.
#[derive(Debug, Args)]
pub(crate) struct AskArgs {
    /// `text` (a table, or unified diffs for `diff`) or `json`.
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    /// Ask the web view's endpoint at this URL (an operator's `--web-view-bind-address`,
    /// reached with `kubectl port-forward`) instead of the API the kubeconfig names.
    #[arg(long)]
    endpoint: Option<String>,
    #[command(flatten)]
    api: ClientArgs,
}

/// Which answer an object verb asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verb {
    History,
    Why,
}

/// Runs `history` or `why`: exit code 0 answered, 2 not (the object, the API or Git could not
/// be read).
pub(crate) fn run_object(verb: Verb, args: &ObjectArgs) -> ExitCode {
    let answer = runtime().and_then(|rt| rt.block_on(ask_object(verb, args)));
    match answer {
        Ok(text) => output::print_out(&text),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs `diff`: exit code 0 when nothing differs, 1 when something does, 2 when the answer
/// could not be had — as `diff` does.
pub(crate) fn run_diff(args: &DiffArgs) -> ExitCode {
    let answer = runtime().and_then(|rt| rt.block_on(ask_diff(args)));
    match answer {
        Ok((text, differs)) => {
            let printed = output::print_out(&text);
            if printed != ExitCode::SUCCESS {
                printed
            } else if differs {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// A client of the web view's endpoint at `url`.
fn endpoint_client(url: &str) -> Result<Client, String> {
    let uri = url
        .parse::<http::Uri>()
        .ok()
        .filter(|u| u.scheme().is_some() && u.host().is_some())
        .ok_or_else(|| format!("--endpoint {url}: give a URL such as http://127.0.0.1:8081"))?;
    Client::try_from(kube::Config::new(uri)).map_err(|e| format!("--endpoint {url}: {e}"))
}

async fn ask_object(verb: Verb, args: &ObjectArgs) -> Result<String, String> {
    let api = args.ask.api.client().await?;
    let object = resolve(&api, &args.object, args.namespace.as_deref()).await?;
    let client = match &args.ask.endpoint {
        Some(url) => endpoint_client(url)?,
        None => api,
    };
    let path = match verb {
        Verb::History => "history",
        Verb::Why => "why",
    };
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("group", &object.group)
        .append_pair("version", &object.version)
        .append_pair("kind", &object.kind)
        .append_pair("plural", &object.plural)
        .append_pair("namespace", &object.namespace)
        .append_pair("name", &object.name)
        .finish();
    let body = get(&client, &format!("/backflow/v1/{path}?{query}")).await?;
    let json = args.ask.output == "json";
    match verb {
        Verb::History => {
            let story: Story = parse(&body)?;
            Ok(if json {
                pretty(&story)?
            } else {
                render::story(&story)
            })
        }
        Verb::Why => {
            let why: Why = parse(&body)?;
            Ok(if json {
                pretty(&why)?
            } else {
                render::why(&why)
            })
        }
    }
}

async fn ask_diff(args: &DiffArgs) -> Result<(String, bool), String> {
    if let Some(target) = &args.target {
        let parts: Vec<&str> = target.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "{target}: name the GitTarget as NAMESPACE/NAME (kubectl get gittargets -A lists them)"
            ));
        }
    }
    let client = match &args.ask.endpoint {
        Some(url) => endpoint_client(url)?,
        None => args.ask.api.client().await?,
    };
    let path = match &args.target {
        Some(target) => format!(
            "/backflow/v1/diff?{}",
            form_urlencoded::Serializer::new(String::new())
                .append_pair("target", target)
                .finish()
        ),
        None => "/backflow/v1/diff".to_string(),
    };
    let diffs: Vec<FolderDiff> = parse(&get(&client, &path).await?)?;
    let differs = diffs.iter().any(|d| !d.objects.is_empty());
    let text = if args.ask.output == "json" {
        pretty(&diffs)?
    } else {
        render::diff(&diffs)
    };
    Ok((text, differs))
}

/// `KIND/NAME` as the API serves it, through discovery.
async fn resolve(
    client: &Client,
    given: &str,
    namespace: Option<&str>,
) -> Result<ObjectRef, String> {
    let Some((kind, name)) = given
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(format!(
            "{given}: name the object as KIND/NAME, e.g. configmap/demo"
        ));
    };
    let wanted = kind.to_lowercase();
    let wanted = SHORT_NAMES
        .iter()
        .find(|(short, _)| *short == wanted)
        .map_or(wanted.clone(), |(_, plural)| (*plural).to_string());
    let (wanted, group) = match wanted.split_once('.') {
        Some((k, g)) => (k.to_string(), Some(g.to_string())),
        None => (wanted, None),
    };
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| format!("cannot read the API's types: {e}"))?;
    let mut found = Vec::new();
    for api_group in discovery.groups() {
        if group.as_deref().is_some_and(|g| g != api_group.name()) {
            continue;
        }
        for (resource, caps) in api_group.recommended_resources() {
            let names = [resource.kind.to_lowercase(), resource.plural.clone()];
            if names.contains(&wanted) {
                found.push((resource, caps.scope));
            }
        }
    }
    let Some((resource, scope)) = found.first().cloned() else {
        return Err(format!(
            "{kind}: the API serves no such kind (kubectl api-resources lists them)"
        ));
    };
    if found.len() > 1 && group.is_none() {
        return Err(format!(
            "{kind} is served by several groups ({}): name it as PLURAL.GROUP/NAME",
            found
                .iter()
                .map(|(r, _)| format!("{}.{}", r.plural, r.group))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let namespace = match scope {
        Scope::Namespaced => namespace.unwrap_or("default").to_string(),
        Scope::Cluster => String::new(),
    };
    Ok(ObjectRef {
        group: resource.group,
        version: resource.version,
        kind: resource.kind,
        plural: resource.plural,
        namespace,
        name: name.to_string(),
    })
}

/// GETs `path` of the API; an error answer as its Status says it.
async fn get(client: &Client, path: &str) -> Result<String, String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    client.request_text(request).await.map_err(|e| match e {
        kube::Error::Api(status) if status.code == 404 && status.message.contains("backflow") => {
            format!(
                "{} (the API is not a `backflow serve` with its mirror on: these verbs ask backflow's own server)",
                status.message
            )
        }
        kube::Error::Api(status) => status.message.clone(),
        other => format!("cannot reach the API: {other}"),
    })
}

fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, String> {
    serde_json::from_str(body).map_err(|e| format!("the answer could not be read: {e}"))
}

fn pretty<T: serde::Serialize>(value: &T) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|json| format!("{json}\n"))
        .map_err(|e| format!("cannot render the answer: {e}"))
}
