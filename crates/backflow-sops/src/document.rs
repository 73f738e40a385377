//! A whole SOPS file: the document, then the `sops` metadata map.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::CryptoRng;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::SopsError;
use crate::cipher::{self, DataKey, ValueType};
use crate::keys::{Identity, Recipient};
use crate::rules::{DEFAULT_UNENCRYPTED_SUFFIX, Rules};
use crate::tree::{Stash, Walk};
use crate::yaml;

/// The top-level key holding the metadata.
const METADATA_KEY: &str = "sops";

/// The `version` written into files: the sops release whose format this codec follows and is
/// tested against. sops compares it only to decide whether to bump it on edit.
pub const FORMAT_VERSION: &str = "3.11.0";

/// How many data keys an [`Encryptor`] remembers for files it wrote or opened (see
/// [`Encryptor::encrypt_document`]); a few thousand Secrets cost well under a megabyte.
const KEY_CACHE_CAPACITY: usize = 4096;

/// Writes documents as SOPS files for a fixed set of age recipients.
///
/// One `Encryptor` serves many files and many threads (`&self` everywhere). It remembers, in
/// memory, the data key of each file it writes, so that re-encrypting a file it wrote keeps the
/// data key and the ciphertext of every unchanged value without needing a secret key. Hand it
/// identities too ([`Encryptor::with_identities`]) and it can do the same for files written
/// before a restart or by sops itself.
pub struct Encryptor {
    recipients: Vec<Recipient>,
    identities: Vec<Identity>,
    keys: Mutex<KeyCache>,
}

impl std::fmt::Debug for Encryptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encryptor")
            .field("recipients", &self.recipients)
            .field("identities", &self.identities.len())
            .finish_non_exhaustive()
    }
}

impl Encryptor {
    /// An encryptor for these `age1…` recipients (sorted and deduplicated, so that reordering a
    /// configuration changes no file). Fails on an invalid recipient and on an empty list: a
    /// secret must never be written without one.
    pub fn new<I, S>(recipients: I) -> Result<Self, SopsError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut parsed = recipients
            .into_iter()
            .map(|r| r.as_ref().parse::<Recipient>())
            .collect::<Result<Vec<_>, _>>()?;
        parsed.sort_by_key(std::string::ToString::to_string);
        parsed.dedup();
        if parsed.is_empty() {
            return Err(SopsError::NoRecipients);
        }
        Ok(Encryptor {
            recipients: parsed,
            identities: Vec::new(),
            keys: Mutex::new(KeyCache::default()),
        })
    }

    /// Also use these identities to open the previous file's data key when it is not in memory
    /// (after a restart, or for a file sops wrote). They are never used to encrypt.
    #[must_use]
    pub fn with_identities(mut self, identities: Vec<Identity>) -> Self {
        self.identities = identities;
        self
    }

    /// The plaintext document of a SOPS file this encryptor can open: one it wrote or opened
    /// (its data key is in memory) or one its identities unwrap; `None` otherwise, or when a
    /// value or the MAC does not verify.
    #[must_use]
    pub fn open(&self, text: &str) -> Option<Value> {
        self.open_previous(text)
            .map(|opened| Value::Object(opened.plain))
    }

    /// The recipients every file is encrypted to, sorted.
    pub fn recipients(&self) -> &[Recipient] {
        &self.recipients
    }

    /// Encrypts `plain` (a JSON object, e.g. a sanitized Secret) into SOPS YAML.
    ///
    /// `previous` is the file's current content, if any. When its data key can be opened (from
    /// memory or with an identity), its MAC verifies, and none of its recipients was removed,
    /// the data key is kept and every unchanged value keeps its ciphertext; if the plaintext and
    /// the rule are unchanged altogether, `lastmodified` and the MAC are kept too, so the output
    /// equals a previous output of this codec byte for byte and an unchanged Secret makes no
    /// commit. Otherwise (no previous, unreadable, tampered, a recipient removed) a fresh data
    /// key is drawn: `previous` only ever saves churn, it never causes an error.
    ///
    /// `now` becomes `lastmodified`; `rng` supplies the data key and the IVs. The age wrapping
    /// of the data key draws its own randomness from the OS (the `age` crate takes none), which
    /// only matters for new files and added recipients, since existing wrappings are reused.
    pub fn encrypt_document<R: CryptoRng + ?Sized>(
        &self,
        plain: &Value,
        rules: &Rules,
        previous: Option<&str>,
        now: SystemTime,
        rng: &mut R,
    ) -> Result<String, SopsError> {
        let Value::Object(doc) = plain else {
            return Err(SopsError::NotAMapping);
        };
        if doc.contains_key(METADATA_KEY) {
            return Err(SopsError::ReservedKey);
        }
        let matcher = rules.compile()?;
        let previous = previous.and_then(|text| self.open_previous(text));

        let ours: Vec<String> = self
            .recipients
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let reusable = previous
            .filter(|p| p.recipients().iter().all(|r| ours.contains(r)))
            .filter(|p| !p.mac_only_encrypted);

        let (key, mut stash, entries, lastmodified) = if let Some(p) = reusable {
            let mut entries = Vec::with_capacity(ours.len());
            for (recipient, parsed) in ours.iter().zip(&self.recipients) {
                match p.age.iter().find(|e| &e.recipient == recipient) {
                    Some(existing) => entries.push(existing.clone()),
                    None => entries.push(wrap(parsed, &p.key)?),
                }
            }
            let unchanged = p.rules == *rules
                && serde_json::to_string(&p.plain).ok() == serde_json::to_string(doc).ok();
            let lastmodified = if unchanged {
                p.lastmodified
            } else {
                rfc3339(now)?
            };
            (p.key, p.stash, entries, lastmodified)
        } else {
            let mut key: DataKey = Zeroizing::new([0u8; 32]);
            rng.fill_bytes(key.as_mut());
            let entries = self
                .recipients
                .iter()
                .map(|r| wrap(r, &key))
                .collect::<Result<Vec<_>, _>>()?;
            (key, Stash::default(), entries, rfc3339(now)?)
        };

        let walk = Walk {
            matcher: &matcher,
            key: &key,
            mac_only_encrypted: false,
        };
        let (mut out, mac) = walk.encrypt(doc, &mut stash, rng)?;
        let mac_aad = mac_aad(&lastmodified);
        let iv = stash.iv(&mac_aad, ValueType::Str, mac.as_bytes(), rng);
        let mac =
            cipher::seal(&key, &iv, &mac_aad, mac.as_bytes(), ValueType::Str).ok_or_else(|| {
                SopsError::UnsupportedValue {
                    path: "sops:mac:".to_owned(),
                    reason: "too large to encrypt".to_owned(),
                }
            })?;

        let meta = metadata(&entries, lastmodified, mac, rules);
        out.insert(METADATA_KEY.to_owned(), Value::Object(meta));

        self.remember(&entries, &key);
        Ok(yaml::emit(&out))
    }

    /// Opens the previous file for reuse; `None` whenever anything about it is off.
    fn open_previous(&self, text: &str) -> Option<Opened> {
        let (doc, meta) = parse_file(text).ok()?;
        let cached = self.lookup(&meta.age);
        let key = match cached {
            Some(key) => key,
            None => unwrap_key(&meta.age, &self.identities).ok()?,
        };
        let opened = open_with_key(doc, meta, key).ok()?;
        self.remember(&opened.age, &opened.key);
        Some(opened)
    }

    fn lookup(&self, entries: &[AgeEntry]) -> Option<DataKey> {
        let cache = self.keys.lock().ok()?;
        cache.map.get(&entries_digest(entries)).cloned()
    }

    fn remember(&self, entries: &[AgeEntry], key: &DataKey) {
        // A poisoned lock only loses the cache, which costs churn, not correctness.
        if let Ok(mut cache) = self.keys.lock() {
            cache.insert(entries_digest(entries), key.clone());
        }
    }
}

/// Decrypts a SOPS file with age identities and returns the plaintext document (without the
/// `sops` metadata). Verifies every value's authentication tag and the MAC over all values, so a
/// changed, moved, added or removed value is refused.
pub fn decrypt_document(text: &str, identities: &[Identity]) -> Result<Value, SopsError> {
    let (doc, meta) = parse_file(text)?;
    let key = unwrap_key(&meta.age, identities)?;
    let opened = open_with_key(doc, meta, key)?;
    Ok(Value::Object(opened.plain))
}

/// Data keys by the digest of the age entries that wrap them, oldest evicted first.
#[derive(Default)]
struct KeyCache {
    map: HashMap<[u8; 32], DataKey>,
    order: VecDeque<[u8; 32]>,
}

impl KeyCache {
    fn insert(&mut self, digest: [u8; 32], key: DataKey) {
        if self.map.insert(digest, key).is_none() {
            self.order.push_back(digest);
            while self.order.len() > KEY_CACHE_CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

/// Wrappings are unique per data key (age draws a fresh ephemeral key each time), so their
/// digest identifies the data key.
fn entries_digest(entries: &[AgeEntry]) -> [u8; 32] {
    let mut h = Sha256::new();
    for e in entries {
        h.update((e.recipient.len() as u64).to_be_bytes());
        h.update(e.recipient.as_bytes());
        h.update((e.enc.len() as u64).to_be_bytes());
        h.update(e.enc.as_bytes());
    }
    h.finalize().into()
}

/// One `sops.age[]` entry.
#[derive(Clone)]
struct AgeEntry {
    recipient: String,
    enc: String,
}

/// The `sops` map, as far as this codec understands it.
struct Metadata {
    age: Vec<AgeEntry>,
    lastmodified: String,
    mac: String,
    rules: Rules,
    mac_only_encrypted: bool,
}

/// A previous file, decrypted and verified.
struct Opened {
    key: DataKey,
    plain: Map<String, Value>,
    stash: Stash,
    age: Vec<AgeEntry>,
    rules: Rules,
    lastmodified: String,
    mac_only_encrypted: bool,
}

impl Opened {
    fn recipients(&self) -> Vec<String> {
        self.age.iter().map(|e| e.recipient.clone()).collect()
    }
}

/// Splits a file into the document and its metadata.
fn parse_file(text: &str) -> Result<(Map<String, Value>, Metadata), SopsError> {
    let value: Value = yaml_serde::from_str(text).map_err(|e| SopsError::Yaml(e.to_string()))?;
    let Value::Object(mut doc) = value else {
        return Err(SopsError::NotAMapping);
    };
    let meta = match doc.shift_remove(METADATA_KEY) {
        Some(Value::Object(meta)) => parse_metadata(&meta)?,
        Some(_) => return Err(SopsError::InvalidMetadata("`sops` is not a map".to_owned())),
        None => return Err(SopsError::MissingMetadata),
    };
    Ok((doc, meta))
}

/// The `sops` map of a file: the wrapped data keys, when it was last changed, the encrypted MAC,
/// the rule that chose what is encrypted, and the format version.
fn metadata(
    entries: &[AgeEntry],
    lastmodified: String,
    mac: String,
    rules: &Rules,
) -> Map<String, Value> {
    let age = entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("recipient".to_owned(), Value::String(e.recipient.clone()));
            m.insert("enc".to_owned(), Value::String(e.enc.clone()));
            Value::Object(m)
        })
        .collect();
    let mut meta = Map::new();
    meta.insert("age".to_owned(), Value::Array(age));
    meta.insert("lastmodified".to_owned(), Value::String(lastmodified));
    meta.insert("mac".to_owned(), Value::String(mac));
    meta.insert(
        rules.metadata_key().to_owned(),
        Value::String(rules.pattern().to_owned()),
    );
    meta.insert(
        "version".to_owned(),
        Value::String(FORMAT_VERSION.to_owned()),
    );
    meta
}

/// The `age` entries of SOPS metadata: the data key wrapped for each recipient.
fn age_entries(meta: &Map<String, Value>) -> Result<Vec<AgeEntry>, SopsError> {
    let invalid = |s: &str| SopsError::InvalidMetadata(s.to_owned());
    let entries = match meta.get("age") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err(invalid("`age` is not a list")),
    };
    let mut age = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Object(entry) = entry else {
            return Err(invalid("an `age` entry is not a map"));
        };
        let field = |name: &str| match entry.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(SopsError::InvalidMetadata(format!(
                "an `age` entry has no string `{name}`"
            ))),
        };
        age.push(AgeEntry {
            recipient: field("recipient")?,
            enc: field("enc")?,
        });
    }
    Ok(age)
}

// Long on purpose: one check per metadata field sops writes, each naming what is wrong.
fn parse_metadata(meta: &Map<String, Value>) -> Result<Metadata, SopsError> {
    let invalid = |s: &str| SopsError::InvalidMetadata(s.to_owned());
    let string = |key: &str| -> Result<Option<&str>, SopsError> {
        match meta.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(SopsError::InvalidMetadata(format!(
                "`{key}` is not a string"
            ))),
        }
    };

    if let Some(Value::Array(groups)) = meta.get("key_groups")
        && !groups.is_empty()
    {
        return Err(SopsError::Unsupported(
            "key_groups (Shamir secret sharing)".to_owned(),
        ));
    }
    for key in ["encrypted_comment_regex", "unencrypted_comment_regex"] {
        if string(key)?.is_some_and(|s| !s.is_empty()) {
            return Err(SopsError::Unsupported(format!(
                "{key} (comments are not read by this codec)"
            )));
        }
    }

    // sops treats an empty rule as absent, and no rule as `unencrypted_suffix: _unencrypted`.
    let mut rules = Vec::new();
    for (key, make) in [
        (
            "encrypted_regex",
            Rules::EncryptedRegex as fn(String) -> Rules,
        ),
        ("unencrypted_regex", Rules::UnencryptedRegex),
        ("encrypted_suffix", Rules::EncryptedSuffix),
        ("unencrypted_suffix", Rules::UnencryptedSuffix),
    ] {
        if let Some(pattern) = string(key)?.filter(|s| !s.is_empty()) {
            rules.push(make(pattern.to_owned()));
        }
    }
    if rules.len() > 1 {
        return Err(invalid("more than one encryption rule"));
    }
    let rules = rules
        .pop()
        .unwrap_or_else(|| Rules::UnencryptedSuffix(DEFAULT_UNENCRYPTED_SUFFIX.to_owned()));

    let mac_only_encrypted = match meta.get("mac_only_encrypted") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("`mac_only_encrypted` is not a boolean")),
    };

    let age = age_entries(meta)?;

    Ok(Metadata {
        age,
        lastmodified: string("lastmodified")?
            .ok_or_else(|| invalid("no `lastmodified`"))?
            .to_owned(),
        mac: string("mac")?.unwrap_or_default().to_owned(),
        rules,
        mac_only_encrypted,
    })
}

/// Opens the data key from the first age entry any identity can open.
fn unwrap_key(entries: &[AgeEntry], identities: &[Identity]) -> Result<DataKey, SopsError> {
    if entries.is_empty() {
        return Err(SopsError::NoAgeRecipients);
    }
    for entry in entries {
        let Ok(decryptor) =
            age::Decryptor::new_buffered(age::armor::ArmoredReader::new(entry.enc.as_bytes()))
        else {
            continue;
        };
        let Ok(mut reader) = decryptor.decrypt(identities.iter().map(|i| &i.0 as _)) else {
            continue;
        };
        let mut plain = Zeroizing::new(Vec::new());
        // Reading stops after 33 bytes: a data key is 32, anything longer is wrong anyway.
        if (&mut reader).take(33).read_to_end(&mut plain).is_err() {
            continue;
        }
        let key: [u8; 32] = plain
            .as_slice()
            .try_into()
            .map_err(|_| SopsError::BadDataKey {
                recipient: entry.recipient.clone(),
            })?;
        return Ok(Zeroizing::new(key));
    }
    Err(SopsError::NoMatchingIdentity {
        recipients: entries.iter().map(|e| e.recipient.clone()).collect(),
    })
}

/// Decrypts the document with a known data key and verifies the MAC.
fn open_with_key(
    doc: Map<String, Value>,
    meta: Metadata,
    key: DataKey,
) -> Result<Opened, SopsError> {
    let matcher = meta.rules.compile()?;
    let walk = Walk {
        matcher: &matcher,
        key: &key,
        mac_only_encrypted: meta.mac_only_encrypted,
    };
    let mut stash = Stash::default();
    let (plain, computed) = walk.decrypt(&doc, &mut stash)?;

    if meta.mac.is_empty() {
        return Err(SopsError::MacMismatch);
    }
    let mac_aad = mac_aad(&meta.lastmodified);
    let sealed = cipher::parse(&meta.mac).map_err(|reason| SopsError::MalformedValue {
        path: "sops:mac:".to_owned(),
        reason,
    })?;
    let stored = cipher::open(&key, &sealed, &mac_aad).ok_or(SopsError::MacMismatch)?;
    // Not constant-time: both sides are derived from the file and the data key, and a
    // mismatch is reported as such; there is no secret to time.
    if stored.as_slice() != computed.as_bytes() {
        return Err(SopsError::MacMismatch);
    }
    stash.remember(&mac_aad, ValueType::Str, computed.as_bytes(), &sealed.iv);

    Ok(Opened {
        key,
        plain,
        stash,
        age: meta.age,
        rules: meta.rules,
        lastmodified: meta.lastmodified,
        mac_only_encrypted: meta.mac_only_encrypted,
    })
}

/// Wraps the data key for one recipient as an armored age file, as sops stores it.
fn wrap(recipient: &Recipient, key: &DataKey) -> Result<AgeEntry, SopsError> {
    let enc = age::encrypt_and_armor(&recipient.0, key.as_ref())
        .map_err(|e| SopsError::Age(e.to_string()))?;
    Ok(AgeEntry {
        recipient: recipient.to_string(),
        enc,
    })
}

/// The MAC's associated data: sops parses `lastmodified` and formats it again as RFC 3339,
/// which drops fractional seconds and writes a zero offset as `Z`.
fn mac_aad(lastmodified: &str) -> String {
    let mut s = lastmodified.trim().to_owned();
    // Fraction: the digits after the seconds' `.`, which sits at byte 19 in RFC 3339.
    if s.as_bytes().get(19) == Some(&b'.') {
        let end = s[20..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(s.len(), |i| 20 + i);
        s.replace_range(19..end, "");
    }
    for zero in ["+00:00", "-00:00"] {
        if let Some(stripped) = s.strip_suffix(zero) {
            s = format!("{stripped}Z");
        }
    }
    s
}

/// `YYYY-MM-DDTHH:MM:SSZ` in UTC.
fn rfc3339(now: SystemTime) -> Result<String, SopsError> {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map_err(|_| SopsError::Clock)?
        .as_secs();
    let days = i64::try_from(secs / 86_400).map_err(|_| SopsError::Clock)?;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    if year > 9999 {
        return Err(SopsError::Clock);
    }
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(rfc3339(t).unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(UNIX_EPOCH).unwrap(), "1970-01-01T00:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap).unwrap(), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn mac_aad_matches_go_formatting() {
        assert_eq!(mac_aad("2024-01-02T03:04:05Z"), "2024-01-02T03:04:05Z");
        assert_eq!(mac_aad("2024-01-02T03:04:05.123Z"), "2024-01-02T03:04:05Z");
        assert_eq!(mac_aad("2024-01-02T03:04:05+00:00"), "2024-01-02T03:04:05Z");
        assert_eq!(
            mac_aad("2024-01-02T03:04:05.5+02:00"),
            "2024-01-02T03:04:05+02:00"
        );
    }
}
