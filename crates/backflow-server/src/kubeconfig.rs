//! The kubeconfig the server writes for kubectl and kube-rs.

use base64::Engine as _;

/// How clients reach and authenticate to the server.
#[derive(Debug, Clone)]
pub struct ClientAccess {
    /// `http://…` or `https://…`.
    pub server_url: String,
    /// PEM of the CA to trust, for https.
    pub ca_pem: Option<String>,
    /// Bearer token, when authentication is on.
    pub token: Option<String>,
}

/// Renders a kubeconfig for `user` (cluster, user and context named `backflow`, the user named
/// as given) authenticating with a client certificate, for the server at `server_url` whose CA
/// is `ca_pem`.
#[must_use]
pub fn render_for_certificate(
    server_url: &str,
    ca_pem: &str,
    user: &str,
    cert: &crate::tls::ClientCertificate,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: backflow\n  cluster:\n    server: {server_url}\n    certificate-authority-data: {}\nusers:\n- name: {user:?}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: backflow\n  context:\n    cluster: backflow\n    user: {user:?}\n    namespace: default\ncurrent-context: backflow\npreferences: {{}}\n",
        b64(ca_pem),
        b64(&cert.cert_pem),
        b64(&cert.key_pem),
    )
}

/// Renders a kubeconfig with one cluster, user and context, all named `backflow`.
#[must_use]
pub fn render(access: &ClientAccess) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut cluster = format!("    server: {}\n", access.server_url);
    match &access.ca_pem {
        Some(ca) => cluster.push_str(&format!("    certificate-authority-data: {}\n", b64(ca))),
        // Plain HTTP (loopback only): `@kubernetes/client-node` refuses an http:// server unless
        // TLS verification is declared off; kubectl and kube-rs ignore the key for http.
        None if access.server_url.starts_with("http://") => {
            cluster.push_str("    insecure-skip-tls-verify: true\n");
        }
        None => {}
    }
    let user = match &access.token {
        Some(t) => format!("    token: {t}\n"),
        None => "    {}\n".to_string(),
    };
    let user = if access.token.is_some() {
        format!("  user:\n{user}")
    } else {
        "  user: {}\n".to_string()
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: backflow\n  cluster:\n{cluster}users:\n- name: backflow\n{user}contexts:\n- name: backflow\n  context:\n    cluster: backflow\n    user: backflow\n    namespace: default\ncurrent-context: backflow\npreferences: {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_declares_tls_verification_off_and_https_carries_its_ca() {
        let plain = render(&ClientAccess {
            server_url: "http://127.0.0.1:6443".into(),
            ca_pem: None,
            token: None,
        });
        assert!(plain.contains("insecure-skip-tls-verify: true"), "{plain}");
        let tls = render(&ClientAccess {
            server_url: "https://10.0.0.1:6443".into(),
            ca_pem: Some("-----BEGIN CERTIFICATE-----".into()),
            token: Some("t".into()),
        });
        assert!(tls.contains("certificate-authority-data:"), "{tls}");
        assert!(!tls.contains("insecure-skip-tls-verify"), "{tls}");
    }
}
