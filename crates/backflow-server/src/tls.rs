//! TLS for non-loopback listeners: a generated CA and server certificate, or the operator's own.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Failures setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The PEM file holds no usable certificate or key.
    #[error("{path} holds no {what} in PEM form")]
    Pem {
        /// The file or directory concerned.
        path: PathBuf,
        /// What the file should have held.
        what: &'static str,
    },
    /// Generating the certificate failed.
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("the TLS certificate or key is not usable: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Certificate material the server serves with.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The server certificate chain file (PEM).
    pub cert_file: PathBuf,
    /// The private key file (PEM).
    pub key_file: PathBuf,
    /// The CA certificate clients should trust (PEM), written into the kubeconfig.
    pub ca_pem: String,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TlsError {
    let path = path.to_path_buf();
    move |source| TlsError::Io {
        action,
        path,
        source,
    }
}

/// Creates (once) a CA and a server certificate for `hosts` under `dir`, reusing them afterwards.
pub fn generated(dir: &Path, hosts: &[String]) -> Result<TlsMaterial, TlsError> {
    let ca_file = dir.join("ca.crt");
    let cert_file = dir.join("server.crt");
    let key_file = dir.join("server.key");
    if ca_file.exists() && cert_file.exists() && key_file.exists() {
        let ca_pem = fs::read_to_string(&ca_file).map_err(io("cannot read", &ca_file))?;
        return Ok(TlsMaterial {
            cert_file,
            key_file,
            ca_pem,
        });
    }
    fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "backflow-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "backflow");
    for h in hosts {
        params.subject_alt_names.push(match h.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(h.clone().try_into()?),
        });
    }
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    let ca_pem = ca_cert.pem();
    fs::write(&ca_file, &ca_pem).map_err(io("cannot write", &ca_file))?;
    fs::write(&cert_file, cert.pem() + &ca_pem).map_err(io("cannot write", &cert_file))?;
    write_private(&key_file, key.serialize_pem().as_bytes())?;
    Ok(TlsMaterial {
        cert_file,
        key_file,
        ca_pem,
    })
}

/// Writes a file only its owner can read.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(path).map_err(io("cannot write", path))?;
    f.write_all(bytes).map_err(io("cannot write", path))
}

/// A rustls server configuration from PEM files.
pub fn server_config(m: &TlsMaterial) -> Result<Arc<ServerConfig>, TlsError> {
    let certs_pem = fs::read(&m.cert_file).map_err(io("cannot read", &m.cert_file))?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut certs_pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(io("cannot parse", &m.cert_file))?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: m.cert_file.clone(),
            what: "certificate",
        });
    }
    let key_pem = fs::read(&m.key_file).map_err(io("cannot read", &m.key_file))?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(io("cannot parse", &m.key_file))?
        .ok_or_else(|| TlsError::Pem {
            path: m.key_file.clone(),
            what: "private key",
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
