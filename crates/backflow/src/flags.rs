//! How the command line's values read: durations, sizes, addresses, rules. Each parser names
//! what it expected, so clap's error says how to fix the flag.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use backflow_api::config::FirstContact;

/// A duration of more than zero, like `10m`.
pub(crate) fn parse_interval(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be more than 0s".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{s:?} is not a duration like 10m or 30s: {e}")),
    }
}

/// A service account's name: a DNS subdomain (lowercase letters, digits, `-` and `.`, at
/// most 253 characters, starting and ending with a letter or digit).
pub(crate) fn parse_service_account(s: &str) -> Result<String, String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.len() <= 253 && s.split('.').all(label_ok) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a service account name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a name, not namespace/name: the account is looked for in each claim's namespace)"
        ))
    }
}

/// `live-wins` or `git-wins`.
pub(crate) fn parse_first_contact(s: &str) -> Result<FirstContact, String> {
    match s {
        "live-wins" => Ok(FirstContact::LiveWins),
        "git-wins" => Ok(FirstContact::GitWins),
        other => Err(format!("{other:?}: expected live-wins or git-wins")),
    }
}

/// A commit window: a duration like `1s` (kept as written: the `GitTarget` carries it).
pub(crate) fn parse_window(s: &str) -> Result<String, String> {
    humantime::parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{s:?} is not a duration like 1s or 500ms: {e}"))
}

/// A size: bytes, or a number with `Ki`, `Mi` or `Gi`.
pub(crate) fn parse_bytes(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let factor: usize = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?}: use bytes, Ki, Mi or Gi (like 128Mi)"
            ));
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("{text:?} is not a size like 128Mi"))
}

/// An address to listen on: `host:port`, `[v6]:port`, or `:port` (every interface, as Go
/// programs and controller-runtime read it: `:9292`, `:8080`).
pub(crate) fn parse_bind_address(text: &str) -> Result<SocketAddr, String> {
    if let Some(port) = text.strip_prefix(':') {
        return port
            .parse::<u16>()
            .map(|port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .map_err(|_| format!("{text:?}: the port after ':' must be a number from 0 to 65535"));
    }
    text.parse().map_err(|_| {
        format!("{text:?} is not an address to listen on: use host:port (127.0.0.1:9292), [v6]:port, or :port for every interface")
    })
}

/// `--authorization-mode`: kube-apiserver's names.
pub(crate) fn parse_authorization_mode(
    s: &str,
) -> Result<backflow_server::AuthorizationMode, String> {
    match s {
        "RBAC" => Ok(backflow_server::AuthorizationMode::Rbac),
        "AlwaysAllow" => Ok(backflow_server::AuthorizationMode::AlwaysAllow),
        other => Err(format!(
            "unknown authorization mode {other:?}: use RBAC or AlwaysAllow"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_kubernetes_writes_them() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("128Mi"), Ok(128 << 20));
        assert_eq!(parse_bytes("2Gi"), Ok(2 << 30));
        assert!(parse_bytes("12MB").is_err());
        assert!(parse_bytes("Mi").is_err());
    }

    #[test]
    fn addresses_read_as_go_programs_write_them() {
        assert_eq!(
            parse_bind_address(":9292"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 9292)))
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_bind_address("[::1]:6443").is_ok_and(|a| a.is_ipv6()));
        assert!(parse_bind_address(":http").is_err());
        assert!(parse_bind_address("9292").is_err());
        assert!(parse_bind_address(":70000").is_err());
    }

    #[test]
    fn service_account_names_are_dns_subdomains() {
        assert_eq!(parse_service_account("deployer"), Ok("deployer".into()));
        assert!(parse_service_account("flux.applier-2").is_ok());
        for bad in ["", "Deployer", "team-a/deployer", "-x", "x-", "a..b", "a_b"] {
            assert!(parse_service_account(bad).is_err(), "{bad:?}");
        }
        assert!(parse_service_account(&"a".repeat(254)).is_err());
    }
}
