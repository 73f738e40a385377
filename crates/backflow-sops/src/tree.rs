//! Walking a document: encrypting or decrypting each leaf and hashing it into the MAC.
//!
//! The walk follows sops exactly, because the MAC depends on it: leaves in document order,
//! depth first; a leaf's path is the keys above it (sequence indices do not count); `null` is
//! neither encrypted nor hashed; an empty string is "encrypted" as itself.

use std::collections::HashMap;
use std::fmt::Write as _;

use rand::CryptoRng;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256, Sha512};

use crate::SopsError;
use crate::cipher::{self, DataKey, IV_LEN, ValueType};
use crate::rules::Matcher;

/// Bytes sops feeds the MAC first when `mac_only_encrypted` is set, so that the two MAC modes
/// never agree by accident.
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// IVs of values read from the previous file, by (associated data, type, plaintext), so an
/// unchanged value is encrypted to the same ciphertext (sops keeps the same "stash").
///
/// Equal values at the same path (items of one list) each keep their own IV, handed out in
/// document order, so a list with repeated items is as stable as everything else. Keys are
/// digests, so no plaintext stays in memory after decryption.
#[derive(Default)]
pub(crate) struct Stash {
    ivs: HashMap<[u8; 32], Vec<[u8; IV_LEN]>>,
    used: HashMap<[u8; 32], usize>,
}

impl Stash {
    fn key(aad: &str, value_type: ValueType, plain: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update([value_type as u8]);
        h.update((aad.len() as u64).to_be_bytes());
        h.update(aad.as_bytes());
        h.update(plain);
        h.finalize().into()
    }

    pub(crate) fn remember(&mut self, aad: &str, value_type: ValueType, plain: &[u8], iv: &[u8]) {
        if let Ok(iv) = <[u8; IV_LEN]>::try_from(iv) {
            self.ivs
                .entry(Self::key(aad, value_type, plain))
                .or_default()
                .push(iv);
        }
    }

    /// The next remembered IV for this value, or a fresh random one.
    pub(crate) fn iv<R: CryptoRng + ?Sized>(
        &mut self,
        aad: &str,
        value_type: ValueType,
        plain: &[u8],
        rng: &mut R,
    ) -> [u8; IV_LEN] {
        let key = Self::key(aad, value_type, plain);
        let used = self.used.entry(key).or_default();
        if let Some(iv) = self.ivs.get(&key).and_then(|ivs| ivs.get(*used)) {
            *used += 1;
            return *iv;
        }
        let mut iv = [0u8; IV_LEN];
        rng.fill_bytes(&mut iv);
        iv
    }
}

/// The running MAC: SHA-512 over the leaf bytes, printed as uppercase hex.
pub(crate) struct Mac(Sha512);

impl Mac {
    pub(crate) fn new(mac_only_encrypted: bool) -> Self {
        let mut h = Sha512::new();
        if mac_only_encrypted {
            h.update(MAC_ONLY_ENCRYPTED_INIT);
        }
        Mac(h)
    }

    fn add(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(crate) fn finish(self) -> String {
        self.0.finalize().iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02X}");
            hex
        })
    }
}

/// The associated data of a value: its path joined with `:`, plus a trailing `:`.
pub(crate) fn aad(path: &[&str]) -> String {
    let mut s = String::new();
    for key in path {
        s.push_str(key);
        s.push(':');
    }
    s
}

/// A leaf's bytes as sops hashes and encrypts them, with its type; `None` for `null`.
///
/// Numbers follow Go: integers in decimal, floats in shortest form without exponent (Rust's
/// `Display` for `f64` writes the same digits as Go's `FormatFloat(f, 'f', -1, 64)`), booleans
/// as `True`/`False`.
fn leaf_bytes(value: &Value, path: &[&str]) -> Result<Option<(Vec<u8>, ValueType)>, SopsError> {
    Ok(Some(match value {
        Value::Null => return Ok(None),
        Value::String(s) => (s.as_bytes().to_vec(), ValueType::Str),
        Value::Bool(b) => (
            if *b { "True" } else { "False" }.as_bytes().to_vec(),
            ValueType::Bool,
        ),
        Value::Number(n) => number_bytes(n).ok_or_else(|| SopsError::UnsupportedValue {
            path: aad(path),
            reason: "integers beyond the signed 64-bit range are not representable in sops"
                .to_owned(),
        })?,
        Value::Array(_) | Value::Object(_) => return Ok(None),
    }))
}

fn number_bytes(n: &Number) -> Option<(Vec<u8>, ValueType)> {
    if let Some(i) = n.as_i64() {
        return Some((i.to_string().into_bytes(), ValueType::Int));
    }
    if n.is_u64() {
        return None;
    }
    n.as_f64()
        .map(|f| (format!("{f}").into_bytes(), ValueType::Float))
}

/// Everything a walk needs.
pub(crate) struct Walk<'a> {
    pub matcher: &'a Matcher,
    pub key: &'a DataKey,
    pub mac_only_encrypted: bool,
}

impl Walk<'_> {
    /// Encrypts every leaf the rule selects; returns the encrypted document and the MAC.
    pub(crate) fn encrypt<R: CryptoRng + ?Sized>(
        &self,
        doc: &Map<String, Value>,
        stash: &mut Stash,
        rng: &mut R,
    ) -> Result<(Map<String, Value>, String), SopsError> {
        let mut mac = Mac::new(self.mac_only_encrypted);
        let mut path = Vec::new();
        let out = self.encrypt_map(doc, &mut path, stash, rng, &mut mac)?;
        Ok((out, mac.finish()))
    }

    fn encrypt_map<'v, R: CryptoRng + ?Sized>(
        &self,
        map: &'v Map<String, Value>,
        path: &mut Vec<&'v str>,
        stash: &mut Stash,
        rng: &mut R,
        mac: &mut Mac,
    ) -> Result<Map<String, Value>, SopsError> {
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            path.push(key);
            let encrypted = self.encrypt_value(value, path, stash, rng, mac);
            path.pop();
            out.insert(key.clone(), encrypted?);
        }
        Ok(out)
    }

    fn encrypt_value<'v, R: CryptoRng + ?Sized>(
        &self,
        value: &'v Value,
        path: &mut Vec<&'v str>,
        stash: &mut Stash,
        rng: &mut R,
        mac: &mut Mac,
    ) -> Result<Value, SopsError> {
        match value {
            Value::Object(map) => Ok(Value::Object(self.encrypt_map(map, path, stash, rng, mac)?)),
            Value::Array(items) => items
                .iter()
                .map(|item| self.encrypt_value(item, path, stash, rng, mac))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            leaf => {
                let Some((plain, value_type)) = leaf_bytes(leaf, path)? else {
                    return Ok(Value::Null);
                };
                let encrypted = self.matcher.encrypts(path);
                if !self.mac_only_encrypted || encrypted {
                    mac.add(&plain);
                }
                if !encrypted {
                    return Ok(leaf.clone());
                }
                if plain.is_empty() {
                    // sops leaves an empty string as `""`, unencrypted.
                    return Ok(Value::String(String::new()));
                }
                let aad = aad(path);
                let iv = stash.iv(&aad, value_type, &plain, rng);
                cipher::seal(self.key, &iv, &aad, &plain, value_type)
                    .map(Value::String)
                    .ok_or_else(|| SopsError::UnsupportedValue {
                        path: aad,
                        reason: "too large to encrypt".to_owned(),
                    })
            }
        }
    }

    /// Decrypts every leaf the rule selects; returns the plaintext document and the MAC it
    /// computes, and remembers every IV in `stash`.
    pub(crate) fn decrypt(
        &self,
        doc: &Map<String, Value>,
        stash: &mut Stash,
    ) -> Result<(Map<String, Value>, String), SopsError> {
        let mut mac = Mac::new(self.mac_only_encrypted);
        let mut path = Vec::new();
        let out = self.decrypt_map(doc, &mut path, stash, &mut mac)?;
        Ok((out, mac.finish()))
    }

    fn decrypt_map<'v>(
        &self,
        map: &'v Map<String, Value>,
        path: &mut Vec<&'v str>,
        stash: &mut Stash,
        mac: &mut Mac,
    ) -> Result<Map<String, Value>, SopsError> {
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            path.push(key);
            let decrypted = self.decrypt_value(value, path, stash, mac);
            path.pop();
            out.insert(key.clone(), decrypted?);
        }
        Ok(out)
    }

    fn decrypt_value<'v>(
        &self,
        value: &'v Value,
        path: &mut Vec<&'v str>,
        stash: &mut Stash,
        mac: &mut Mac,
    ) -> Result<Value, SopsError> {
        match value {
            Value::Object(map) => Ok(Value::Object(self.decrypt_map(map, path, stash, mac)?)),
            Value::Array(items) => items
                .iter()
                .map(|item| self.decrypt_value(item, path, stash, mac))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Null => Ok(Value::Null),
            leaf => {
                let encrypted = self.matcher.encrypts(path);
                let plain = if encrypted {
                    self.open_leaf(leaf, path, stash)?
                } else {
                    leaf.clone()
                };
                if (!self.mac_only_encrypted || encrypted)
                    && let Some((bytes, _)) = leaf_bytes(&plain, path)?
                {
                    mac.add(&bytes);
                }
                Ok(plain)
            }
        }
    }

    fn open_leaf(
        &self,
        leaf: &Value,
        path: &[&str],
        stash: &mut Stash,
    ) -> Result<Value, SopsError> {
        let malformed = |reason: String| SopsError::MalformedValue {
            path: aad(path),
            reason,
        };
        let Value::String(text) = leaf else {
            return Err(malformed(
                "expected an encrypted string, found a plain value".to_owned(),
            ));
        };
        if text.is_empty() {
            return Ok(Value::String(String::new()));
        }
        let sealed = cipher::parse(text).map_err(malformed)?;
        let aad = aad(path);
        let raw = cipher::open(self.key, &sealed, &aad)
            .ok_or_else(|| SopsError::Authentication { path: aad.clone() })?;
        let typed = typed_value(&raw, sealed.value_type).map_err(malformed)?;
        if let Some((canonical, value_type)) = leaf_bytes(&typed, path)? {
            stash.remember(&aad, value_type, &canonical, &sealed.iv);
        }
        Ok(typed)
    }
}

/// Turns decrypted bytes back into a JSON value, as sops' `Decrypt` does for each type tag.
fn typed_value(raw: &[u8], value_type: ValueType) -> Result<Value, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "decrypted value is not UTF-8".to_owned());
    match value_type {
        // `time` comes back as its RFC 3339 text: JSON has no timestamp type, and the text is
        // exactly what sops hashed.
        ValueType::Str | ValueType::Bytes | ValueType::Time => Ok(Value::String(text?.to_owned())),
        ValueType::Int => text?
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "type:int value is not an integer".to_owned()),
        ValueType::Float => text?
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| "type:float value is not a finite number".to_owned()),
        // Go's strconv.ParseBool.
        ValueType::Bool => match text? {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Value::Bool(false)),
            _ => Err("type:bool value is not a boolean".to_owned()),
        },
        ValueType::Comment => Err("an encrypted comment stands where a value belongs".to_owned()),
    }
}
