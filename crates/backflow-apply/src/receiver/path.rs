//! Where a `GitReceiver` listens: a path derived from its token, as a Flux `Receiver`'s is.

use sha2::{Digest, Sha256};

/// The prefix every receiver path starts with.
pub const PATH_PREFIX: &str = "/git-push/";

/// `/git-push/` + lowercase hex SHA-256 of the bytes token ‖ name ‖ namespace (no separators).
///
/// Knowing the path already takes knowing the token, and rotating the token moves it.
#[must_use]
pub fn webhook_path(token: &[u8], name: &str, namespace: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(token);
    hasher.update(name.as_bytes());
    hasher.update(namespace.as_bytes());
    format!("{PATH_PREFIX}{}", hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The bytes of a hex string (either case); `None` if it is not hex.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    digits
        .chunks_exact(2)
        .map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_the_sha256_of_token_name_and_namespace_concatenated() {
        // printf '%s' 'secretmy-receiverteam-a' | sha256sum
        assert_eq!(
            webhook_path(b"secret", "my-receiver", "team-a"),
            "/git-push/4a3f0486a9b93153eb2fb8bc1c0754113f3b1bc8207e82fbf96623a9e465e5e7"
        );
        // No separators, as Flux derives it: the same bytes give the same path.
        assert_eq!(
            webhook_path(b"secret", "a", "bc"),
            webhook_path(b"secret", "ab", "c")
        );
        assert_ne!(
            webhook_path(b"one", "r", "ns"),
            webhook_path(b"two", "r", "ns"),
            "rotating the token moves the path"
        );
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00ABff"), Some(vec![0x00, 0xab, 0xff]));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
    }
}
