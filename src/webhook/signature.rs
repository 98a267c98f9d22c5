//! `X-Hub-Signature-256`: Meta signs every webhook body with HMAC-SHA256 keyed by the app secret.
//!
//! The MAC is computed over the raw bytes exactly as received: re-serialising parsed JSON
//! changes escapes (`\u00e1` vs `á`) and breaks on any non-ASCII text. The comparison is
//! constant-time (`Mac::verify_slice`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "sha256=";

/// Why a signature was refused. All of them answer 401; the variant is for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no X-Hub-Signature-256 header")]
    Missing,
    #[error("no app secret configured; unsigned payloads are never accepted")]
    NoSecret,
    #[error("signature header does not start with `sha256=`")]
    WrongPrefix,
    #[error("signature is not 64 hex digits")]
    Malformed,
    #[error("signature does not match the body")]
    Mismatch,
}

impl SignatureError {
    /// A short label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            SignatureError::Missing => "missing",
            SignatureError::NoSecret => "no_secret",
            SignatureError::WrongPrefix => "wrong_prefix",
            SignatureError::Malformed => "malformed",
            SignatureError::Mismatch => "mismatch",
        }
    }
}

/// Checks `header` (the value of `X-Hub-Signature-256`) against `body`.
pub fn verify(
    secret: Option<&[u8]>,
    header: Option<&[u8]>,
    body: &[u8],
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let secret = secret.ok_or(SignatureError::NoSecret)?;
    let hex_digest = header
        .strip_prefix(PREFIX.as_bytes())
        .ok_or(SignatureError::WrongPrefix)?;
    let mut expected = [0u8; 32];
    // Hex digits of either case decode to the same bytes.
    hex::decode_to_slice(hex_digest, &mut expected).map_err(|_| SignatureError::Malformed)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

/// The header value for `body`: what Meta sends, and what tests and the load harness sign with.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("{PREFIX}{}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"app-secret";

    fn check(header: Option<&str>, body: &[u8]) -> Result<(), SignatureError> {
        verify(Some(SECRET), header.map(str::as_bytes), body)
    }

    #[test]
    fn a_good_signature_verifies() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        assert_eq!(check(Some(&sign(SECRET, body)), body), Ok(()));
    }

    #[test]
    fn a_known_vector_verifies() {
        // HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"), RFC-style vector.
        let header = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
        let body = b"The quick brown fox jumps over the lazy dog";
        assert_eq!(verify(Some(b"key"), Some(header.as_bytes()), body), Ok(()));
    }

    #[test]
    fn a_missing_header_is_refused() {
        assert_eq!(check(None, b"{}"), Err(SignatureError::Missing));
    }

    #[test]
    fn without_a_secret_everything_is_refused() {
        let header = sign(SECRET, b"{}");
        assert_eq!(
            verify(None, Some(header.as_bytes()), b"{}"),
            Err(SignatureError::NoSecret)
        );
    }

    #[test]
    fn a_signature_over_other_bytes_is_refused() {
        let header = sign(SECRET, b"{\"a\":1}");
        assert_eq!(
            check(Some(&header), b"{\"a\":2}"),
            Err(SignatureError::Mismatch)
        );
        let other_key = sign(b"another-secret", b"{}");
        assert_eq!(
            check(Some(&other_key), b"{}"),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_truncated_signature_is_refused() {
        let header = sign(SECRET, b"{}");
        assert_eq!(
            check(Some(&header[..header.len() - 2]), b"{}"),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            check(Some("sha256="), b"{}"),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn a_wrong_prefix_is_refused() {
        let header = sign(SECRET, b"{}");
        let sha1 = header.replace("sha256=", "sha1=");
        assert_eq!(check(Some(&sha1), b"{}"), Err(SignatureError::WrongPrefix));
        let bare = header.trim_start_matches("sha256=").to_owned();
        assert_eq!(check(Some(&bare), b"{}"), Err(SignatureError::WrongPrefix));
        let upper_prefix = header.replace("sha256=", "SHA256=");
        assert_eq!(
            check(Some(&upper_prefix), b"{}"),
            Err(SignatureError::WrongPrefix)
        );
    }

    #[test]
    fn uppercase_hex_is_the_same_signature() {
        let header = sign(SECRET, b"{}");
        let upper = format!("sha256={}", header["sha256=".len()..].to_uppercase());
        assert_eq!(check(Some(&upper), b"{}"), Ok(()));
    }

    #[test]
    fn non_hex_characters_are_refused() {
        let header = format!("sha256={}", "g".repeat(64));
        assert_eq!(check(Some(&header), b"{}"), Err(SignatureError::Malformed));
    }

    #[test]
    fn a_body_with_accents_and_emoji_verifies_over_its_raw_bytes() {
        let body = "{\"text\":{\"body\":\"¿Cuánto cuesta el ático en Málaga? 🏠👍\"}}".as_bytes();
        assert_eq!(check(Some(&sign(SECRET, body)), body), Ok(()));
        // The same JSON with the escapes a re-serialiser might write is different bytes.
        let escaped = br#"{"text":{"body":"\u00bfCu\u00e1nto cuesta el \u00e1tico en M\u00e1laga? \ud83c\udfe0\ud83d\udc4d"}}"#;
        assert_eq!(
            check(Some(&sign(SECRET, body)), escaped),
            Err(SignatureError::Mismatch)
        );
    }
}
