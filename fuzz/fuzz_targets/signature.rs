//! `zaguan::webhook::signature::{sign, verify}`: the input is split into a secret, a body and a
//! header (with the `arbitrary` crate).
//!
//! Checks what the module documents:
//! - `verify` accepts `sign(secret, body)` for any secret and body, and the same digest in upper
//!   case ("hex digits of either case decode to the same bytes");
//! - the same signature over other bytes, or with a digest digit changed, is a `Mismatch`;
//! - the order of the checks: no header → `Missing`, no secret → `NoSecret`, no `sha256=` prefix
//!   → `WrongPrefix`, not 64 hex digits → `Malformed`, else `Ok` exactly when the digest is the
//!   body's HMAC and `Mismatch` otherwise;
//! - and that it never panics on an arbitrary header.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zaguan::webhook::signature::{SignatureError, sign, verify};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    secret: Option<&'a [u8]>,
    header: Option<&'a [u8]>,
    /// Which digest digit to change, and to what.
    flip_at: u8,
    flip_to: u8,
    body: &'a [u8],
}

const PREFIX: &[u8] = b"sha256=";

fuzz_target!(|input: Input<'_>| {
    let Input {
        secret,
        header,
        flip_at,
        flip_to,
        body,
    } = input;

    // Any header: never panics, and the documented order of the checks.
    let got = verify(secret, header, body);
    let expected = match (header, secret) {
        (None, _) => Err(SignatureError::Missing),
        (Some(_), None) => Err(SignatureError::NoSecret),
        (Some(header), Some(secret)) => match header.strip_prefix(PREFIX) {
            None => Err(SignatureError::WrongPrefix),
            Some(digest) if digest.len() != 64 || !digest.iter().all(u8::is_ascii_hexdigit) => {
                Err(SignatureError::Malformed)
            }
            Some(digest) => {
                let good = &sign(secret, body).into_bytes()[PREFIX.len()..];
                if digest.eq_ignore_ascii_case(good) {
                    Ok(())
                } else {
                    Err(SignatureError::Mismatch)
                }
            }
        },
    };
    assert_eq!(
        got,
        expected,
        "header {:?}",
        header.map(String::from_utf8_lossy)
    );

    let secret = secret.unwrap_or_default();
    let signed = sign(secret, body);
    assert!(signed.starts_with("sha256="), "{signed}");
    assert_eq!(signed.len(), PREFIX.len() + 64, "{signed}");

    // What we sign verifies, in either case of hex.
    assert_eq!(verify(Some(secret), Some(signed.as_bytes()), body), Ok(()));
    let upper = format!("sha256={}", signed[PREFIX.len()..].to_ascii_uppercase());
    assert_eq!(verify(Some(secret), Some(upper.as_bytes()), body), Ok(()));

    // Not over other bytes.
    let mut other = body.to_vec();
    other.push(flip_to);
    assert_eq!(
        verify(Some(secret), Some(signed.as_bytes()), &other),
        Err(SignatureError::Mismatch)
    );

    // Not with one digit of the digest changed (to another hex digit, not just its case).
    let mut flipped = signed.clone().into_bytes();
    let at = PREFIX.len() + usize::from(flip_at) % 64;
    let digits = b"0123456789abcdef";
    let current = digits
        .iter()
        .position(|&d| d == flipped[at])
        .expect("sign writes lower-case hex");
    flipped[at] = digits[(current + 1 + usize::from(flip_to) % 15) % 16];
    assert_eq!(
        verify(Some(secret), Some(&flipped), body),
        Err(SignatureError::Mismatch)
    );
});
