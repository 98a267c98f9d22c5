//! The console's session: a cookie signed with a key derived from `ZAGUAN_ADMIN_TOKEN`, so any
//! instance behind a load balancer reads it and changing the token signs everyone out. It
//! holds the operator's name (recorded with each action, as the CLI does) and its expiry; each
//! state-changing form carries a CSRF token derived from the session, which another site can
//! neither read nor forge.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie's name.
pub const COOKIE: &str = "zaguan_console";
/// How long a sign-in lasts.
pub const LIFETIME: chrono::Duration = chrono::Duration::hours(8);

/// A signed-in operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub operator: String,
    pub expires: DateTime<Utc>,
    nonce: String,
}

/// Signs and reads sessions with a key derived from the admin token.
pub struct Sessions {
    key: [u8; 32],
}

impl Sessions {
    pub fn new(admin_token: &SecretString) -> Self {
        let mut digest = Sha256::new();
        digest.update(b"zaguan console session\0");
        digest.update(admin_token.expose_secret().as_bytes());
        Self {
            key: digest.finalize().into(),
        }
    }

    fn mac(&self, parts: &[&str]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(b"|");
        }
        hex::encode(mac.finalize().into_bytes())
    }

    /// A new session for `operator` from `now`, and its cookie value.
    pub fn open(&self, operator: &str, now: DateTime<Utc>) -> (Session, String) {
        let session = Session {
            operator: operator.to_owned(),
            // Whole seconds: what the cookie carries.
            expires: DateTime::from_timestamp((now + LIFETIME).timestamp(), 0).unwrap_or(now),
            nonce: format!("{:016x}", rand::random::<u64>()),
        };
        let name = hex::encode(operator.as_bytes());
        let expires = session.expires.timestamp().to_string();
        let mac = self.mac(&[&name, &expires, &session.nonce]);
        (
            session.clone(),
            format!("{name}.{expires}.{}.{mac}", session.nonce),
        )
    }

    /// The session a cookie value holds, if it is ours and not expired.
    pub fn read(&self, value: &str, now: DateTime<Utc>) -> Option<Session> {
        let mut parts = value.split('.');
        let (name, expires, nonce, mac) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let expected = self.mac(&[name, expires, nonce]);
        if !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
            return None;
        }
        let expires = DateTime::from_timestamp(expires.parse().ok()?, 0)?;
        if expires <= now {
            return None;
        }
        let operator = String::from_utf8(hex::decode(name).ok()?).ok()?;
        Some(Session {
            operator,
            expires,
            nonce: nonce.to_owned(),
        })
    }

    /// The CSRF token of `session`'s forms.
    pub fn csrf(&self, session: &Session) -> String {
        self.mac(&["csrf", &session.nonce])[..32].to_owned()
    }

    /// Whether `token` is `session`'s CSRF token.
    pub fn csrf_ok(&self, session: &Session, token: &str) -> bool {
        bool::from(self.csrf(session).as_bytes().ct_eq(token.as_bytes()))
    }
}

/// The `Set-Cookie` value of a session cookie (`secure` over https).
pub fn set_cookie(value: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME.num_seconds(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that signs out.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// The session cookie's value among a request's `Cookie` headers.
pub fn cookie_value(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_reads_back_only_when_signed_by_the_same_token_and_not_expired() {
        let now = Utc::now();
        let sessions = Sessions::new(&SecretString::from("token-a".to_owned()));
        let (session, cookie) = sessions.open("Marta López", now);
        assert_eq!(sessions.read(&cookie, now).as_ref(), Some(&session));
        assert_eq!(session.operator, "Marta López");
        let other = Sessions::new(&SecretString::from("token-b".to_owned()));
        assert_eq!(other.read(&cookie, now), None, "another token");
        assert_eq!(sessions.read(&cookie, now + LIFETIME), None, "expired");
        let forged = cookie.replacen(&hex::encode("Marta López"), &hex::encode("admin"), 1);
        assert_eq!(
            sessions.read(&forged, now),
            None,
            "another name, same signature"
        );
        assert!(sessions.csrf_ok(&session, &sessions.csrf(&session)));
        assert!(!sessions.csrf_ok(&session, ""));
        let (second, _) = sessions.open("Marta López", now);
        assert!(
            !sessions.csrf_ok(&second, &sessions.csrf(&session)),
            "per session"
        );
    }
}
