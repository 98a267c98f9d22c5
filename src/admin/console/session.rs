//! The console's session cookie: an opaque random value naming a record in `sessions`
//! ([`crate::admin::team`]), `HttpOnly` and `SameSite=Strict`, `Secure` over https.

use crate::admin::team::SESSION_LIFETIME;

/// The cookie's name.
pub const COOKIE: &str = "zaguan_console";

/// The `Set-Cookie` value of a session cookie (`secure` over https).
pub fn set_cookie(value: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFETIME.num_seconds(),
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
    cookie(headers, COOKIE)
}

/// The value of the cookie `wanted` among a request's `Cookie` headers.
pub fn cookie(headers: &axum::http::HeaderMap, wanted: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == wanted)
        .map(|(_, value)| value.to_owned())
}
