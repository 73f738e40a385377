//! Authentication and TLS: what turns them on, and that clients without the token are refused.

use backflow_server::{ServerConfig, start};
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::common::{client_from_kubeconfig, guard, status_of, store_rv};

/// The kubeconfig's settings with the credentials removed.
async fn anonymous_client(kubeconfig: &std::path::Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.auth_info = AuthInfo::default();
    Client::try_from(config).expect("client")
}

async fn get_with_authorization(
    client: &Client,
    uri: &str,
    authorization: Option<&str>,
) -> (StatusCode, Value, Option<String>) {
    let mut req = Request::builder().method(Method::GET).uri(uri);
    if let Some(a) = authorization {
        req = req.header(http::header::AUTHORIZATION, a);
    }
    let req = req.body(kube::client::Body::empty()).expect("request");
    let resp = guard("request", client.send(req)).await.expect("send");
    let code = resp.status();
    let challenge = resp
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (code, value, challenge)
}

/// Checks that a client with the kubeconfig's credentials works and one without is refused.
async fn assert_token_required(kubeconfig: &std::path::Path) {
    let client = client_from_kubeconfig(kubeconfig).await;
    let anonymous = anonymous_client(kubeconfig).await;

    let namespaces: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("the kubeconfig's client is let in")
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    assert!(namespaces.iter().any(|n| n == "default"), "{namespaces:?}");
    let before = store_rv(&client).await;

    let st = status_of(
        Api::<Namespace>::all(anonymous.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (401, "Unauthorized"));

    let cm: ConfigMap = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sneaky"}}),
    )
    .expect("configmap");
    let st = status_of(
        Api::<ConfigMap>::default_namespaced(anonymous.clone())
            .create(&PostParams::default(), &cm)
            .await,
    );
    assert_eq!(st.code, 401);

    for authorization in [None, Some("Bearer wrong-token"), Some("Basic dXNlcjpwYXNz")] {
        let (code, body, challenge) =
            get_with_authorization(&anonymous, "/api/v1/namespaces", authorization).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["reason"], "Unauthorized");
        assert_eq!(challenge.as_deref(), Some("Bearer"));
    }
    // Discovery is protected too; only the version and health endpoints are public.
    let (code, _, _) = get_with_authorization(&anonymous, "/apis", None).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    let (code, version, _) = get_with_authorization(&anonymous, "/version", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(version["major"], "1");

    assert_eq!(store_rv(&client).await, before, "nothing was written");
    assert!(
        Api::<ConfigMap>::default_namespaced(client)
            .get_opt("sneaky")
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test]
async fn non_loopback_listener_gets_tls_and_a_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "0.0.0.0:0".parse().expect("address");
    let server = start(config).await.expect("start on 0.0.0.0");
    assert!(
        server.access.server_url.starts_with("https://"),
        "{}",
        server.access.server_url
    );
    assert!(server.access.token.is_some(), "a token is generated");
    assert!(
        server.access.ca_pem.is_some(),
        "the kubeconfig carries the CA"
    );
    let written = std::fs::read_to_string(&server.kubeconfig_path).expect("kubeconfig");
    assert!(written.contains("certificate-authority-data:"));
    assert!(written.contains("token:"));

    assert_token_required(&server.kubeconfig_path).await;

    // Plain HTTP to the TLS port gets nothing useful.
    let mut plain = Config::new(
        format!("http://127.0.0.1:{}", server.addr.port())
            .parse()
            .expect("uri"),
    );
    plain.auth_info = AuthInfo::default();
    let plain = Client::try_from(plain).expect("client");
    let refused = guard(
        "plain HTTP to a TLS port",
        Api::<Namespace>::all(plain).list(&ListParams::default()),
    )
    .await;
    assert!(
        refused.is_err(),
        "plain HTTP must not be served: {refused:?}"
    );

    // A restart reuses the generated token and CA, so clients configured before keep working.
    let (token, ca) = (server.access.token.clone(), server.access.ca_pem.clone());
    guard("shutdown", server.shutdown()).await;
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "0.0.0.0:0".parse().expect("address");
    let server = start(config).await.expect("restart on the same data dir");
    assert_eq!(server.access.token, token);
    assert_eq!(server.access.ca_pem, ca);
    assert_token_required(&server.kubeconfig_path).await;
    guard("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn token_file_on_loopback_requires_the_token_over_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "a-token-from-a-file\n").expect("write token");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.token_file = Some(token_file);
    let server = start(config).await.expect("start");
    // kubectl sends no bearer token over plain HTTP: a token turns TLS on, loopback or not.
    assert!(server.access.server_url.starts_with("https://"));
    assert!(server.access.ca_pem.is_some());
    assert_eq!(server.access.token.as_deref(), Some("a-token-from-a-file"));
    assert_token_required(&server.kubeconfig_path).await;
    guard("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn given_certificate_turns_on_tls_on_loopback() {
    let dir = tempfile::tempdir().expect("temp dir");
    let material = backflow_server::generate_certificate(
        &dir.path().join("own-tls"),
        &["localhost".to_string(), "127.0.0.1".to_string()],
    )
    .expect("certificate");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "tls-token").expect("write token");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.tls_cert_file = Some(material.cert_file.clone());
    config.tls_key_file = Some(material.key_file.clone());
    config.token_file = Some(token_file);
    let server = start(config).await.expect("start");
    assert!(
        server.access.server_url.starts_with("https://"),
        "{}",
        server.access.server_url
    );
    assert_token_required(&server.kubeconfig_path).await;
    guard("shutdown", server.shutdown()).await;

    // Half a TLS configuration is refused rather than silently served in plain text.
    let mut config = ServerConfig::new(dir.path().join("data2"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.tls_cert_file = Some(material.cert_file);
    let err = start(config).await.expect_err("cert without key");
    assert!(err.to_string().contains("go together"), "{err}");
}

#[tokio::test]
async fn a_client_that_trickles_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.header_read_timeout = std::time::Duration::from_secs(1);
    let server = start(config).await.expect("start");
    // Slowloris: a request line and one header, then nothing.
    let mut slow = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    slow.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        slow.read_to_end(&mut buf),
    )
    .await;
    assert!(
        closed.is_ok(),
        "the server still holds a connection whose headers never end"
    );
    // A client that sends its request in time is served.
    let mut fine = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    fine.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    fine.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    guard("shutdown", server.shutdown()).await;
}

/// A connection that sends no byte, or stops in the middle of a request body, is closed after
/// the header-read timeout (both stayed open for good before), and the half-sent write changes
/// nothing.
#[tokio::test]
async fn a_client_that_sends_nothing_or_stalls_in_a_body_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.header_read_timeout = std::time::Duration::from_secs(1);
    let server = start(config).await.expect("start");
    let closed_soon = |mut stream: tokio::net::TcpStream| async move {
        let mut buf = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut buf),
        )
        .await;
        (read.is_ok(), String::from_utf8_lossy(&buf).into_owned())
    };
    let silent = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (closed, _) = closed_soon(silent).await;
    assert!(
        closed,
        "the server still holds a connection that never sent a byte"
    );

    let mut stalled = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    stalled
        .write_all(
            b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
              Content-Type: application/json\r\nContent-Length: 200\r\n\r\n\
              {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"half\"",
        )
        .await
        .expect("write");
    let (closed, answer) = closed_soon(stalled).await;
    assert!(
        closed,
        "the server still holds a connection whose body stopped"
    );
    assert!(!answer.starts_with("HTTP/1.1 201"), "{answer}");
    let client = client_from_kubeconfig(&server.kubeconfig_path).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(
        configmaps.get_opt("half").await.expect("get").is_none(),
        "the half-sent write changed nothing"
    );
    guard("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn a_client_certificate_of_the_servers_ca_names_its_user_and_another_cas_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "admin-token").expect("write token");
    let mut config = ServerConfig::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.token_file = Some(token_file);
    let server = start(config).await.expect("start");
    let tls_dir = dir.path().join("data").join("tls");
    let with_certificate = |cert: backflow_server::ClientCertificate| {
        let kubeconfig = server.kubeconfig_path.clone();
        async move {
            let kc = Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
            let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .expect("config");
            config.auth_info = AuthInfo {
                client_certificate_data: Some(b64(&cert.cert_pem)),
                client_key_data: Some(b64(&cert.key_pem).into()),
                ..AuthInfo::default()
            };
            Client::try_from(config).expect("client")
        }
    };
    // Under RBAC, the certificate's group `dev` may edit `default`.
    let admin = client_from_kubeconfig(&server.kubeconfig_path).await;
    let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "dev-edit", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}],
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin, "default")
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind dev to edit");
    let alice = backflow_server::issue_client_certificate(&tls_dir, "alice", &["dev".into()])
        .expect("issue");
    let client = with_certificate(alice).await;
    let created = guard(
        "create as alice",
        Api::<ConfigMap>::namespaced(client, "default").create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "by-alice"}})).expect("cm"),
        ),
    )
    .await
    .expect("alice's certificate is let in");
    let rv: u64 = created
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("number");
    let key = backflow_api::ObjectKey::new(
        backflow_api::GroupResource::new("", "configmaps"),
        "default",
        "by-alice",
    );
    assert_eq!(
        server.engine.store().authors().user_of(&key, rv).as_deref(),
        Some("alice"),
        "the write is attributed to the certificate's user"
    );

    // A certificate another CA signed is not let in.
    let other = tempfile::tempdir().expect("temp dir");
    backflow_server::generate_certificate(other.path(), &["127.0.0.1".to_string()])
        .expect("another CA");
    let mallory =
        backflow_server::issue_client_certificate(other.path(), "mallory", &[]).expect("issue");
    let client = with_certificate(mallory).await;
    let refused = guard(
        "list as mallory",
        Api::<ConfigMap>::namespaced(client, "default").list(&ListParams::default()),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
    guard("shutdown", server.shutdown()).await;
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn secrets_are_sealed_at_rest_and_a_missing_key_refuses_the_start() {
    use k8s_openapi::api::core::v1::Secret;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let value = "hunter2-at-rest-5517";
    let start_here = || {
        let mut config = ServerConfig::new(&data);
        config.listen = "127.0.0.1:0".parse().expect("address");
        start(config)
    };
    let server = start_here().await.expect("start");
    let client = client_from_kubeconfig(&server.kubeconfig_path).await;
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db"}, "stringData": {"password": value}}))
    .expect("secret");
    guard("create", secrets.create(&PostParams::default(), &secret))
        .await
        .expect("create");
    guard("shutdown", server.shutdown()).await;

    let stored = std::fs::read(data.join("store.redb")).expect("read the store");
    let b64 = b64(value);
    for needle in [value.as_bytes(), b64.as_bytes()] {
        assert!(
            !stored.windows(needle.len()).any(|w| w == needle),
            "the store holds the Secret's value in plaintext"
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("store.key"))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let server = start_here().await.expect("restart");
    let client = client_from_kubeconfig(&server.kubeconfig_path).await;
    let read = guard(
        "get",
        Api::<Secret>::namespaced(client, "default").get("db"),
    )
    .await
    .expect("get");
    let password = read.data.expect("data")["password"].0.clone();
    assert_eq!(password, value.as_bytes(), "read back in the clear");
    guard("shutdown", server.shutdown()).await;

    std::fs::rename(data.join("store.key"), dir.path().join("store.key.bak")).expect("move");
    let err = start_here()
        .await
        .expect_err("no key, no start")
        .to_string();
    assert!(
        err.contains("store.key") && err.contains("encrypted Secrets"),
        "{err}"
    );
}
