//! Conversation references for viewers: a viewer must not read a customer's number in full, not
//! even in the address bar, so their links carry the number sealed (XChaCha20-Poly1305, with a key
//! derived from `ZAGUAN_ADMIN_TOKEN`, so every instance opens any instance's links).

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

/// Sealed references start with it; a WhatsApp number never does.
const PREFIX: char = 'v';

pub struct Refs {
    cipher: XChaCha20Poly1305,
}

impl Refs {
    pub fn new(admin_token: &SecretString) -> Self {
        let mut digest = Sha256::new();
        digest.update(b"zaguan console conversation refs\0");
        digest.update(admin_token.expose_secret().as_bytes());
        let key: [u8; 32] = digest.finalize().into();
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// `wa_id` sealed: a fresh nonce each time, so two links to one customer differ.
    pub fn seal(&self, wa_id: &str) -> String {
        let nonce: [u8; 24] = rand::random();
        let sealed = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), wa_id.as_bytes())
            .expect("encrypting a short text does not fail");
        format!("{PREFIX}{}{}", hex::encode(nonce), hex::encode(sealed))
    }

    /// The number a sealed reference holds; `None` for anything else.
    pub fn open(&self, reference: &str) -> Option<String> {
        let bytes = hex::decode(reference.strip_prefix(PREFIX)?).ok()?;
        if bytes.len() <= 24 {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(24);
        let plain = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), sealed)
            .ok()?;
        String::from_utf8(plain).ok()
    }

    pub fn is_sealed(reference: &str) -> bool {
        reference.starts_with(PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_reference_opens_only_with_the_same_token_and_hides_the_number() {
        let refs = Refs::new(&SecretString::from("a".repeat(32)));
        let sealed = refs.seal("34600111222");
        assert!(!sealed.contains("34600111222"));
        assert!(!sealed.contains(&hex::encode("34600111222")));
        assert_ne!(sealed, refs.seal("34600111222"));
        assert_eq!(refs.open(&sealed).as_deref(), Some("34600111222"));
        let other = Refs::new(&SecretString::from("b".repeat(32)));
        assert_eq!(other.open(&sealed), None);
        let mut tampered = sealed.clone();
        tampered.replace_range(60..61, if &sealed[60..61] == "0" { "1" } else { "0" });
        assert_eq!(refs.open(&tampered), None);
        assert_eq!(refs.open("34600111222"), None);
        assert_eq!(refs.open("vzz"), None);
    }
}
