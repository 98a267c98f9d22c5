//! The team's secrets: passwords (argon2, slow on purpose, since people choose and reuse them
//! rarely but attackers guess them offline), API tokens and session cookies (random, 256 bits,
//! so a plain SHA-256 of them is enough to store and look up).

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha2::{Digest, Sha256};

/// A new password to type once: five groups of four letters and digits (about 100 bits),
/// without the characters people confuse (0/O, 1/l/I).
pub fn new_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let groups: Vec<String> = (0..5)
        .map(|_| {
            (0..4)
                .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
                .collect()
        })
        .collect();
    groups.join("-")
}

/// A new API token: `zg_` and 64 hex digits.
pub fn new_token() -> String {
    format!("zg_{}", hex::encode(rand::random::<[u8; 32]>()))
}

/// A new session cookie value: 64 hex digits.
pub fn new_session_secret() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// How a random secret (token, session cookie) is stored and looked up.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The argon2id hash of `password`, in the PHC string format (salt and parameters inside).
pub fn hash_password(password: &str) -> String {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).expect("16 bytes encode");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashes any password with its default parameters")
        .to_string()
}

/// Whether `password` is the one `hash` was made from. Unknown names are checked against
/// [`dummy_hash`], so a wrong name costs as long as a wrong password.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A hash no password matches in practice, for names that do not exist.
pub fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| hash_password(&new_token()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let password = new_password();
        assert_eq!(password.len(), 24);
        let hash = hash_password(&password);
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains(&password));
        assert!(verify_password(&password, &hash));
        assert!(!verify_password("wrong", &hash));
        assert!(!verify_password(&password, dummy_hash()));
        assert!(!verify_password(&password, "not a hash"));
        assert_ne!(hash_password(&password), hash, "salted");
    }

    #[test]
    fn tokens_are_long_random_and_stored_as_digests() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.len() >= 32);
        assert_eq!(digest(&a), digest(&a));
        assert_ne!(digest(&a), digest(&b));
        assert!(!digest(&a).contains(&a[3..]));
    }
}
