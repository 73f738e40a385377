//! Verifying a delivery: is it signed with the receiver's token, and which event is it?
//!
//! Every comparison is constant-time (an HMAC check through `Mac::verify_slice`, a plain token
//! through `subtle`), and an empty token verifies nothing.

use backflow_api::config::ReceiverType;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use http::HeaderMap;
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::path::unhex;

/// What a verified delivery announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A push: the payload names the repository and the ref.
    Push,
    /// A host checking the webhook (GitHub's `ping`): answered, nothing else.
    Ping,
    /// Any other event (tags, issues, …): answered, nothing else.
    Other(String),
}

/// Why a delivery was not verified. The HTTP answer is 404 whatever the reason (a wrong path
/// and a wrong signature look alike from outside); the log names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The receiver's token is empty: nothing can be verified with it.
    #[error("the receiver's token is empty; put a secret in the Secret's key `token`")]
    EmptyToken,
    /// The header carrying the signature or token is absent.
    #[error("no {0} header")]
    Missing(&'static str),
    /// GitHub sent only the SHA-1 signature.
    #[error(
        "only X-Hub-Signature (SHA-1) was sent; backflow verifies X-Hub-Signature-256, which every GitHub webhook sends"
    )]
    Sha1Only,
    /// The signature's algorithm is not one backflow accepts.
    #[error("{header} names algorithm {algorithm:?}; accepted: {accepted}")]
    Algorithm {
        /// The header read.
        header: &'static str,
        /// What it named.
        algorithm: String,
        /// What would have been accepted.
        accepted: &'static str,
    },
    /// The header is not `<algorithm>=<hex>` or bare hex.
    #[error("{0} is not a hex signature")]
    Malformed(&'static str),
    /// The signature does not match the body and the token (a wrong secret, or a changed body).
    #[error("the {0} signature does not match the body signed with the receiver's token")]
    Mismatch(&'static str),
    /// The plain token differs.
    #[error("X-Gitlab-Token differs from the receiver's token")]
    WrongToken,
    /// The delivery comes from another kind of host than the receiver's `spec.type`.
    #[error("the delivery carries no {expected} headers (spec.type is {receiver})")]
    WrongHost {
        /// The receiver's type.
        receiver: &'static str,
        /// The header family expected.
        expected: &'static str,
    },
}

/// The Gitea family's event and signature headers, in the order they are looked for.
const GITEA_EVENTS: [&str; 3] = ["x-gitea-event", "x-forgejo-event", "x-gogs-event"];
const GITEA_SIGNATURES: [(&str, &str); 3] = [
    ("x-gitea-signature", "X-Gitea-Signature"),
    ("x-forgejo-signature", "X-Forgejo-Signature"),
    ("x-gogs-signature", "X-Gogs-Signature"),
];

/// Verifies a delivery to a receiver of `kind` holding `token`, and says which event it is.
pub fn verify(
    kind: ReceiverType,
    token: &[u8],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Event, Rejection> {
    if token.is_empty() {
        return Err(Rejection::EmptyToken);
    }
    match kind {
        ReceiverType::GitHub => github(token, headers, body),
        ReceiverType::Gitea => gitea(token, headers, body),
        ReceiverType::GitLab => gitlab(token, headers),
        ReceiverType::GenericHmac => generic(token, headers, body),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// GitHub, and the hosts that imitate it: `X-Hub-Signature-256`. Gitea-family deliveries also
/// carry it, so they verify here too, with their event read from their own header first.
fn github(token: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<Event, Rejection> {
    let Some(value) = header(headers, "x-hub-signature-256") else {
        if headers.contains_key("x-hub-signature") {
            return Err(Rejection::Sha1Only);
        }
        return Err(Rejection::Missing("X-Hub-Signature-256"));
    };
    let (algorithm, hex) = value
        .split_once('=')
        .ok_or(Rejection::Malformed("X-Hub-Signature-256"))?;
    if !algorithm.eq_ignore_ascii_case("sha256") {
        return Err(Rejection::Algorithm {
            header: "X-Hub-Signature-256",
            algorithm: algorithm.to_string(),
            accepted: "sha256",
        });
    }
    check_hmac(Algorithm::Sha256, "X-Hub-Signature-256", token, body, hex)?;
    let event = GITEA_EVENTS
        .iter()
        .find_map(|h| header(headers, h))
        .or_else(|| header(headers, "x-github-event"))
        .unwrap_or("push");
    Ok(named_event(event))
}

/// Gitea, Forgejo, Gogs: bare hex HMAC-SHA256 in their own signature header.
fn gitea(token: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<Event, Rejection> {
    let Some(event) = GITEA_EVENTS.iter().find_map(|h| header(headers, h)) else {
        return Err(Rejection::WrongHost {
            receiver: "gitea",
            expected: "X-Gitea-Event, X-Forgejo-Event or X-Gogs-Event",
        });
    };
    let Some((name, value)) = GITEA_SIGNATURES
        .iter()
        .find_map(|(h, name)| header(headers, h).map(|v| (*name, v)))
    else {
        return Err(Rejection::Missing("X-Gitea-Signature"));
    };
    check_hmac(Algorithm::Sha256, name, token, body, value)?;
    Ok(named_event(event))
}

/// GitLab: `X-Gitlab-Token` is the token itself; the event is `X-Gitlab-Event`.
fn gitlab(token: &[u8], headers: &HeaderMap) -> Result<Event, Rejection> {
    let Some(sent) = headers.get("x-gitlab-token") else {
        return Err(Rejection::Missing("X-Gitlab-Token"));
    };
    if !bool::from(sent.as_bytes().ct_eq(token)) {
        return Err(Rejection::WrongToken);
    }
    Ok(match header(headers, "x-gitlab-event") {
        Some("Push Hook") => Event::Push,
        Some(other) => Event::Other(other.to_string()),
        None => Event::Other(String::new()),
    })
}

/// A relay of one's own: `X-Signature: sha256=<hex>` or `sha512=<hex>`; every delivery is a push.
fn generic(token: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<Event, Rejection> {
    let value = header(headers, "x-signature").ok_or(Rejection::Missing("X-Signature"))?;
    let (algorithm, hex) = value
        .split_once('=')
        .ok_or(Rejection::Malformed("X-Signature"))?;
    match algorithm.to_ascii_lowercase().as_str() {
        "sha256" => check_hmac(Algorithm::Sha256, "X-Signature", token, body, hex)?,
        "sha512" => check_hmac(Algorithm::Sha512, "X-Signature", token, body, hex)?,
        _ => {
            return Err(Rejection::Algorithm {
                header: "X-Signature",
                algorithm: algorithm.to_string(),
                accepted: "sha256, sha512",
            });
        }
    }
    Ok(Event::Push)
}

fn named_event(event: &str) -> Event {
    match event.to_ascii_lowercase().as_str() {
        "push" => Event::Push,
        "ping" => Event::Ping,
        _ => Event::Other(event.to_string()),
    }
}

/// The hash an HMAC is built on.
#[derive(Debug, Clone, Copy)]
enum Algorithm {
    Sha256,
    Sha512,
}

/// The HMAC of `body` keyed with `token` (HMAC takes keys of every length, so this is `None`
/// only in theory).
fn hmac(algorithm: Algorithm, token: &[u8], body: &[u8]) -> Option<Vec<u8>> {
    Some(match algorithm {
        Algorithm::Sha256 => {
            let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(token).ok()?;
            mac.update(body);
            mac.finalize().into_bytes().to_vec()
        }
        Algorithm::Sha512 => {
            let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(token).ok()?;
            mac.update(body);
            mac.finalize().into_bytes().to_vec()
        }
    })
}

/// Checks `hex` against the HMAC of `body` keyed with `token`, in constant time.
fn check_hmac(
    algorithm: Algorithm,
    header: &'static str,
    token: &[u8],
    body: &[u8],
    hex: &str,
) -> Result<(), Rejection> {
    let sent = unhex(hex.trim()).ok_or(Rejection::Malformed(header))?;
    let expected = hmac(algorithm, token, body).ok_or(Rejection::EmptyToken)?;
    if bool::from(expected.ct_eq(&sent)) {
        Ok(())
    } else {
        Err(Rejection::Mismatch(header))
    }
}

/// `sha256=<hex>` of `body` keyed with `token`: what a generic-hmac sender puts in `X-Signature`.
#[must_use]
pub fn sign_sha256(token: &[u8], body: &[u8]) -> String {
    let digest = hmac(Algorithm::Sha256, token, body)
        .map(|mac| super::path::hex(&mac))
        .unwrap_or_default();
    format!("sha256={digest}")
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// GitHub's published test vector (docs: validating webhook deliveries).
    const VECTOR_SECRET: &[u8] = b"It's a Secret to Everybody";
    const VECTOR_BODY: &[u8] = b"Hello, World!";
    const VECTOR_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn githubs_published_vector_verifies_and_signs() {
        assert_eq!(sign_sha256(VECTOR_SECRET, VECTOR_BODY), VECTOR_SIGNATURE);
        let h = headers(&[
            ("x-hub-signature-256", VECTOR_SIGNATURE),
            ("x-github-event", "push"),
        ]);
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &h, VECTOR_BODY),
            Ok(Event::Push)
        );
        assert_eq!(
            verify(ReceiverType::GitHub, b"another secret", &h, VECTOR_BODY),
            Err(Rejection::Mismatch("X-Hub-Signature-256"))
        );
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &h, b"Hello, World?"),
            Err(Rejection::Mismatch("X-Hub-Signature-256"))
        );
    }

    #[test]
    fn github_refuses_sha1_alone_a_missing_header_and_an_empty_token() {
        let sha1 = headers(&[("x-hub-signature", "sha1=0123"), ("x-github-event", "push")]);
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &sha1, VECTOR_BODY),
            Err(Rejection::Sha1Only)
        );
        assert_eq!(
            verify(
                ReceiverType::GitHub,
                VECTOR_SECRET,
                &HeaderMap::new(),
                VECTOR_BODY
            ),
            Err(Rejection::Missing("X-Hub-Signature-256"))
        );
        let signed = headers(&[("x-hub-signature-256", &sign_sha256(b"", VECTOR_BODY))]);
        assert_eq!(
            verify(ReceiverType::GitHub, b"", &signed, VECTOR_BODY),
            Err(Rejection::EmptyToken)
        );
        let sha1_in_256 = headers(&[("x-hub-signature-256", "sha1=0123")]);
        assert!(matches!(
            verify(
                ReceiverType::GitHub,
                VECTOR_SECRET,
                &sha1_in_256,
                VECTOR_BODY
            ),
            Err(Rejection::Algorithm { .. })
        ));
    }

    #[test]
    fn ping_and_other_events_are_told_apart() {
        let ping = headers(&[
            ("x-hub-signature-256", VECTOR_SIGNATURE),
            ("x-github-event", "ping"),
        ]);
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &ping, VECTOR_BODY),
            Ok(Event::Ping)
        );
        let issues = headers(&[
            ("x-hub-signature-256", VECTOR_SIGNATURE),
            ("x-github-event", "issues"),
        ]);
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &issues, VECTOR_BODY),
            Ok(Event::Other("issues".into()))
        );
    }

    #[test]
    fn gitea_family_is_detected_before_its_github_headers() {
        let bare = sign_sha256(VECTOR_SECRET, VECTOR_BODY).replace("sha256=", "");
        for (event, signature) in [
            ("x-gitea-event", "x-gitea-signature"),
            ("x-forgejo-event", "x-forgejo-signature"),
            ("x-gogs-event", "x-gogs-signature"),
        ] {
            let h = headers(&[(event, "push"), (signature, &bare)]);
            assert_eq!(
                verify(ReceiverType::Gitea, VECTOR_SECRET, &h, VECTOR_BODY),
                Ok(Event::Push),
                "{event}"
            );
        }
        // Gitea also sends GitHub headers; its own event header decides what it is.
        let both = headers(&[
            ("x-gitea-event", "create"),
            ("x-github-event", "push"),
            ("x-hub-signature-256", VECTOR_SIGNATURE),
            ("x-gitea-signature", &bare),
        ]);
        assert_eq!(
            verify(ReceiverType::GitHub, VECTOR_SECRET, &both, VECTOR_BODY),
            Ok(Event::Other("create".into()))
        );
        let github_only = headers(&[("x-hub-signature-256", VECTOR_SIGNATURE)]);
        assert!(matches!(
            verify(
                ReceiverType::Gitea,
                VECTOR_SECRET,
                &github_only,
                VECTOR_BODY
            ),
            Err(Rejection::WrongHost { .. })
        ));
        let wrong = headers(&[("x-gitea-event", "push"), ("x-gitea-signature", "00ff")]);
        assert_eq!(
            verify(ReceiverType::Gitea, VECTOR_SECRET, &wrong, VECTOR_BODY),
            Err(Rejection::Mismatch("X-Gitea-Signature"))
        );
    }

    #[test]
    fn gitlab_compares_the_token_and_reads_the_event() {
        let push = headers(&[
            ("x-gitlab-token", "s3cret"),
            ("x-gitlab-event", "Push Hook"),
        ]);
        assert_eq!(
            verify(ReceiverType::GitLab, b"s3cret", &push, b"{}"),
            Ok(Event::Push)
        );
        assert_eq!(
            verify(ReceiverType::GitLab, b"s3cre", &push, b"{}"),
            Err(Rejection::WrongToken)
        );
        let tag = headers(&[
            ("x-gitlab-token", "s3cret"),
            ("x-gitlab-event", "Tag Push Hook"),
        ]);
        assert_eq!(
            verify(ReceiverType::GitLab, b"s3cret", &tag, b"{}"),
            Ok(Event::Other("Tag Push Hook".into()))
        );
        assert_eq!(
            verify(ReceiverType::GitLab, b"s3cret", &HeaderMap::new(), b"{}"),
            Err(Rejection::Missing("X-Gitlab-Token"))
        );
    }

    #[test]
    fn generic_hmac_takes_sha256_and_sha512_and_nothing_weaker() {
        let h = headers(&[("x-signature", &sign_sha256(b"k", b"body"))]);
        assert_eq!(
            verify(ReceiverType::GenericHmac, b"k", &h, b"body"),
            Ok(Event::Push)
        );
        let mac = hmac(Algorithm::Sha512, b"k", b"body").unwrap();
        let sha512 = format!("sha512={}", super::super::path::hex(&mac));
        let h = headers(&[("x-signature", &sha512)]);
        assert_eq!(
            verify(ReceiverType::GenericHmac, b"k", &h, b"body"),
            Ok(Event::Push)
        );
        let h = headers(&[("x-signature", "sha1=aa")]);
        assert!(matches!(
            verify(ReceiverType::GenericHmac, b"k", &h, b"body"),
            Err(Rejection::Algorithm { .. })
        ));
        let h = headers(&[("x-signature", "sha256=zz")]);
        assert_eq!(
            verify(ReceiverType::GenericHmac, b"k", &h, b"body"),
            Err(Rejection::Malformed("X-Signature"))
        );
    }
}
