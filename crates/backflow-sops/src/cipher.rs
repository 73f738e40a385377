//! One value: `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<t>]`.
//!
//! AES-256-GCM with a 32-byte nonce (what sops uses), the value's path as associated data, and a
//! type tag so that `5`, `"5"` and `true` come back as what they were.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

/// AES-256-GCM with the 32-byte nonce sops uses (Go's `NewGCMWithNonceSize(32)`).
type Gcm = AesGcm<Aes256, U32>;

/// Nonce length sops writes.
pub(crate) const IV_LEN: usize = 32;
/// GCM tag length.
const TAG_LEN: usize = 16;

/// The 32-byte data key every value of one file is encrypted under.
pub(crate) type DataKey = Zeroizing<[u8; 32]>;

/// The type tag of an encrypted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ValueType {
    Str,
    Int,
    Float,
    Bool,
    Bytes,
    Time,
    Comment,
}

impl ValueType {
    fn as_str(self) -> &'static str {
        match self {
            ValueType::Str => "str",
            ValueType::Int => "int",
            ValueType::Float => "float",
            ValueType::Bool => "bool",
            ValueType::Bytes => "bytes",
            ValueType::Time => "time",
            ValueType::Comment => "comment",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "str" => ValueType::Str,
            "int" => ValueType::Int,
            "float" => ValueType::Float,
            "bool" => ValueType::Bool,
            "bytes" => ValueType::Bytes,
            "time" => ValueType::Time,
            "comment" => ValueType::Comment,
            _ => return None,
        })
    }
}

/// A parsed `ENC[…]` string.
pub(crate) struct Sealed {
    pub data: Vec<u8>,
    pub iv: Vec<u8>,
    pub tag: Vec<u8>,
    pub value_type: ValueType,
}

/// Parses `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`; the reason on failure never quotes the input.
pub(crate) fn parse(text: &str) -> Result<Sealed, String> {
    let inner = text
        .strip_prefix("ENC[AES256_GCM,")
        .ok_or("not an ENC[AES256_GCM,…] value")?;
    // sops' own pattern tolerates trailing text after `]`; nothing legitimate writes any, so a
    // strict end is a cheap tamper signal.
    let inner = inner.strip_suffix(']').ok_or("no closing `]`")?;
    let mut fields = inner.split(',');
    let mut field = |name: &str| -> Result<&str, String> {
        fields
            .next()
            .and_then(|f| f.strip_prefix(name))
            .and_then(|f| f.strip_prefix(':'))
            .ok_or_else(|| format!("missing `{name}:` field"))
    };
    let data = field("data")?;
    let iv = field("iv")?;
    let tag = field("tag")?;
    let value_type = field("type")?;
    if fields.next().is_some() {
        return Err("unexpected extra field".to_owned());
    }
    let decode = |name: &str, b64: &str| {
        STANDARD
            .decode(b64)
            .map_err(|_| format!("`{name}` is not base64"))
    };
    let sealed = Sealed {
        data: decode("data", data)?,
        iv: decode("iv", iv)?,
        tag: decode("tag", tag)?,
        value_type: ValueType::parse(value_type).ok_or("unknown `type`")?,
    };
    if sealed.iv.len() != IV_LEN {
        return Err(format!("`iv` is {} bytes, not {IV_LEN}", sealed.iv.len()));
    }
    if sealed.tag.len() != TAG_LEN {
        return Err(format!(
            "`tag` is {} bytes, not {TAG_LEN}",
            sealed.tag.len()
        ));
    }
    Ok(sealed)
}

/// Encrypts `plain` under `key` with `iv` and the associated data `aad`, and formats it;
/// `None` only for a value beyond GCM's 64 GiB limit.
pub(crate) fn seal(
    key: &DataKey,
    iv: &[u8; IV_LEN],
    aad: &str,
    plain: &[u8],
    value_type: ValueType,
) -> Option<String> {
    let gcm = Gcm::new(aes_gcm::Key::<Gcm>::from_slice(key.as_slice()));
    let payload = Payload {
        msg: plain,
        aad: aad.as_bytes(),
    };
    let out = gcm.encrypt(Nonce::<U32>::from_slice(iv), payload).ok()?;
    let (data, tag) = out.split_at(out.len().checked_sub(TAG_LEN)?);
    Some(format!(
        "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{}]",
        STANDARD.encode(data),
        STANDARD.encode(iv),
        STANDARD.encode(tag),
        value_type.as_str()
    ))
}

/// Decrypts a parsed value; `None` when authentication fails.
pub(crate) fn open(key: &DataKey, sealed: &Sealed, aad: &str) -> Option<Zeroizing<Vec<u8>>> {
    let gcm = Gcm::new(aes_gcm::Key::<Gcm>::from_slice(key.as_slice()));
    let mut msg = Vec::with_capacity(sealed.data.len() + sealed.tag.len());
    msg.extend_from_slice(&sealed.data);
    msg.extend_from_slice(&sealed.tag);
    let payload = Payload {
        msg: &msg,
        aad: aad.as_bytes(),
    };
    // `parse` checked the nonce length, so `from_slice` cannot panic.
    gcm.decrypt(Nonce::<U32>::from_slice(&sealed.iv), payload)
        .ok()
        .map(Zeroizing::new)
}
