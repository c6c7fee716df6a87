//! Signing artifacts with the state directory's key: an HMAC-SHA256 over
//! the canonical JSON of a value with its own top-level `hmac` field left
//! out (keys sorted, no insignificant whitespace, so the same value always
//! gives the same bytes), or over raw bytes. Checked in constant time.

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use super::TraceError;
use super::receipt_key::ReceiptKey;

fn mac(key: &ReceiptKey) -> Result<Hmac<Sha256>, TraceError> {
    <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).map_err(|_| TraceError::KeyInvalid {
        path: Default::default(),
        reason: "HMAC refused the key length".to_string(),
    })
}

/// The canonical JSON of `value` without its top-level `hmac` field.
pub(crate) fn signed_text(value: &impl Serialize) -> Result<String, TraceError> {
    let mut value = serde_json::to_value(value).map_err(TraceError::serialize("a signed value"))?;
    if let Some(object) = value.as_object_mut() {
        object.remove("hmac");
    }
    let mut out = String::new();
    write_canonical(&value, &mut out);
    Ok(out)
}

/// The hex HMAC of `value` (its `hmac` field left out).
pub(crate) fn sign(key: &ReceiptKey, value: &impl Serialize) -> Result<String, TraceError> {
    sign_bytes(key, signed_text(value)?.as_bytes())
}

/// Whether `claimed` is the HMAC of `value` (its `hmac` field left out).
pub(crate) fn verify(key: &ReceiptKey, value: &impl Serialize, claimed: &str) -> bool {
    signed_text(value).is_ok_and(|text| verify_bytes(key, text.as_bytes(), claimed))
}

/// The hex HMAC of `bytes`.
pub(crate) fn sign_bytes(key: &ReceiptKey, bytes: &[u8]) -> Result<String, TraceError> {
    let mut mac = mac(key)?;
    mac.update(bytes);
    Ok(hex::encode(mac.finalize().into_bytes()))
}

/// Whether `claimed` (hex) is the HMAC of `bytes`, compared in constant time.
pub(crate) fn verify_bytes(key: &ReceiptKey, bytes: &[u8], claimed: &str) -> bool {
    let Ok(claimed) = hex::decode(claimed) else {
        return false;
    };
    let Ok(mut mac) = mac(key) else {
        return false;
    };
    mac.update(bytes);
    mac.verify_slice(&claimed).is_ok()
}

/// A record that carries its own HMAC in its `hmac` field: signed over its
/// `DOMAIN` followed by its JSON as serde writes it, with that field empty.
pub(crate) trait SealedJson: Serialize + Clone {
    const DOMAIN: &'static [u8];
    fn hmac(&self) -> &str;
    fn hmac_mut(&mut self) -> &mut String;
}

fn sealed_bytes<T: SealedJson>(value: &T) -> Result<Vec<u8>, TraceError> {
    let mut unsigned = value.clone();
    unsigned.hmac_mut().clear();
    let mut bytes = T::DOMAIN.to_vec();
    serde_json::to_writer(&mut bytes, &unsigned)
        .map_err(TraceError::serialize("a sealed record"))?;
    Ok(bytes)
}

/// Sets `value`'s `hmac` field to its HMAC.
pub(crate) fn seal<T: SealedJson>(key: &ReceiptKey, value: &mut T) -> Result<(), TraceError> {
    let hmac = sign_bytes(key, &sealed_bytes(value)?)?;
    *value.hmac_mut() = hmac;
    Ok(())
}

/// Whether `value`'s `hmac` field is its HMAC, compared in constant time.
pub(crate) fn is_sealed<T: SealedJson>(key: &ReceiptKey, value: &T) -> bool {
    sealed_bytes(value).is_ok_and(|bytes| verify_bytes(key, &bytes, value.hmac()))
}

/// JSON with object keys in byte order and no insignificant whitespace.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => push_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_string(key, out);
                out.push(':');
                if let Some(item) = map.get(key) {
                    write_canonical(item, out);
                }
            }
            out.push('}');
        }
    }
}

fn push_json_string(s: &str, out: &mut String) {
    // Serializing a &str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_everything_but_itself() {
        let key = ReceiptKey::from_bytes([9; 32]);
        let mut value = serde_json::json!({"b": 1, "a": [true, null, "x"], "hmac": ""});
        let signed = sign(&key, &value).expect("sign");
        value["hmac"] = serde_json::Value::String(signed.clone());
        assert!(
            verify(&key, &value, &signed),
            "the hmac field is not covered"
        );
        value["b"] = serde_json::json!(2);
        assert!(!verify(&key, &value, &signed));
        assert!(!verify(&ReceiptKey::from_bytes([8; 32]), &value, &signed));
        assert!(!verify(&key, &value, "not hex"));
        assert_eq!(
            signed_text(&serde_json::json!({"b": 1, "a": 2})).expect("text"),
            r#"{"a":2,"b":1}"#
        );
    }
}
