//! Failed sign-ins (the console's form, the admin API's bearer token), limited where they come
//! from: per client address, and per account from that address. Never globally, and never for
//! an account from everywhere — either would let anyone lock the operators out by failing on
//! purpose.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;

/// Failed sign-ins from one address within [`WINDOW`] before it must wait: more than one
/// operator's typos, fewer than a guessing script's.
pub const PER_ADDRESS: usize = 30;
/// Failed sign-ins for one account from one address within [`WINDOW`].
pub const PER_ACCOUNT: usize = 5;
/// How far back failures count.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Most addresses and accounts remembered; past it, the quiet ones are forgotten first.
const MAX_TRACKED: usize = 10_000;

/// This process's failed sign-ins, the console's and the admin API's together.
pub fn throttle() -> &'static SignInThrottle {
    static THROTTLE: std::sync::OnceLock<SignInThrottle> = std::sync::OnceLock::new();
    THROTTLE.get_or_init(SignInThrottle::default)
}

/// The client address of a request to this process: see [`client_address`].
pub fn client_of(
    state: &crate::state::AppState,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Option<IpAddr> {
    let header = state
        .config
        .as_ref()
        .and_then(|config| config.client_ip_header.as_deref());
    client_address(headers, peer, header)
}

/// The failures of the last [`WINDOW`], by address and by account from an address.
#[derive(Default)]
pub struct SignInThrottle {
    failures: Mutex<Failures>,
}

#[derive(Default)]
struct Failures {
    by_address: HashMap<IpAddr, VecDeque<Instant>>,
    by_account: HashMap<(String, IpAddr), VecDeque<Instant>>,
}

impl SignInThrottle {
    /// Whether `account` may try to sign in from `address` now.
    pub fn allows(&self, address: IpAddr, account: &str, now: Instant) -> bool {
        let mut failures = self.lock();
        let recent = |list: Option<&mut VecDeque<Instant>>| {
            list.map_or(0, |list| {
                forget_before(list, now);
                list.len()
            })
        };
        let from_address = recent(failures.by_address.get_mut(&address));
        let for_account = recent(failures.by_account.get_mut(&(key(account), address)));
        from_address < PER_ADDRESS && for_account < PER_ACCOUNT
    }

    /// A failed sign-in for `account` from `address`.
    pub fn failed(&self, address: IpAddr, account: &str, now: Instant) {
        let mut failures = self.lock();
        if failures.by_address.len() + failures.by_account.len() >= MAX_TRACKED {
            failures.forget_quiet(now);
        }
        failures
            .by_address
            .entry(address)
            .or_default()
            .push_back(now);
        failures
            .by_account
            .entry((key(account), address))
            .or_default()
            .push_back(now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Failures> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Failures {
    /// Drops every entry with no failure left in the window; if that is not enough, all.
    fn forget_quiet(&mut self, now: Instant) {
        self.by_address.retain(|_, list| {
            forget_before(list, now);
            !list.is_empty()
        });
        self.by_account.retain(|_, list| {
            forget_before(list, now);
            !list.is_empty()
        });
        if self.by_address.len() + self.by_account.len() >= MAX_TRACKED {
            self.by_address.clear();
            self.by_account.clear();
        }
    }
}

fn forget_before(list: &mut VecDeque<Instant>, now: Instant) {
    while list
        .front()
        .is_some_and(|at| now.saturating_duration_since(*at) >= WINDOW)
    {
        list.pop_front();
    }
}

/// An account as typed, folded: «Marta » and «marta» are one account.
fn key(account: &str) -> String {
    account.trim().to_lowercase()
}

/// The client's address: the last one in `header` (what the proxy in front appended), when
/// the deployment names such a header (`ZAGUAN_CLIENT_IP_HEADER`), else the connection's peer.
/// `None` only for a request that came through no connection (served in-process, in tests):
/// such requests are not limited.
pub fn client_address(
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    header: Option<&str>,
) -> Option<IpAddr> {
    let from_header = header
        .and_then(|name| headers.get_all(name).iter().next_back())
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.rsplit(',').next())
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    from_header.or(peer.map(|peer| peer.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ten_wrong_passwords_lock_only_that_account_from_that_address() {
        let throttle = SignInThrottle::default();
        let now = Instant::now();
        for _ in 0..10 {
            throttle.failed(ip("203.0.113.7"), "Marta", now);
        }
        assert!(!throttle.allows(ip("203.0.113.7"), "marta ", now));
        assert!(
            throttle.allows(ip("203.0.113.7"), "Lucía", now),
            "another account from the same address"
        );
        assert!(
            throttle.allows(ip("198.51.100.9"), "Marta", now),
            "the same account from another address"
        );
        assert!(
            throttle.allows(ip("203.0.113.7"), "Marta", now + WINDOW),
            "a minute later"
        );
    }

    #[test]
    fn one_address_guessing_many_accounts_is_stopped() {
        let throttle = SignInThrottle::default();
        let now = Instant::now();
        for n in 0..PER_ADDRESS {
            throttle.failed(ip("203.0.113.8"), &format!("user{n}"), now);
        }
        assert!(!throttle.allows(ip("203.0.113.8"), "someone-new", now));
        assert!(throttle.allows(ip("203.0.113.9"), "someone-new", now));
    }

    #[test]
    fn the_memory_is_bounded() {
        let throttle = SignInThrottle::default();
        let now = Instant::now();
        for n in 0..(MAX_TRACKED * 2) {
            let address = IpAddr::from([10, (n >> 16) as u8, (n >> 8) as u8, n as u8]);
            throttle.failed(address, "x", now);
        }
        let failures = throttle.lock();
        assert!(failures.by_address.len() + failures.by_account.len() <= MAX_TRACKED + 2);
    }

    #[test]
    fn the_address_is_the_proxys_last_hop_only_when_configured() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "198.51.100.1, 203.0.113.7".parse().unwrap(),
        );
        let peer = Some("10.0.0.2:40000".parse().unwrap());
        assert_eq!(
            client_address(&headers, peer, Some("x-forwarded-for")),
            Some(ip("203.0.113.7"))
        );
        assert_eq!(
            client_address(&headers, peer, None),
            Some(ip("10.0.0.2")),
            "a header nobody vouches for is ignored"
        );
        assert_eq!(
            client_address(&HeaderMap::new(), None, Some("x-forwarded-for")),
            None
        );
    }
}
