//! Failed sign-ins (the console's form, the admin API's bearer token), limited where they come
//! from: per client address, and per account from that address. Never globally, and never for
//! an account from everywhere — either would let anyone lock the operators out by failing on
//! purpose. The failures are kept in the store with an expiry (`sign_in_failures`), so every
//! instance counts the same ones, and a client cannot reset them by reaching another.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};

use crate::admin::team::TeamStore;

/// Failed sign-ins from one address within [`WINDOW`] before it must wait: more than one
/// operator's typos, fewer than a guessing script's.
pub const PER_ADDRESS: usize = 30;
/// Failed sign-ins for one account from one address within [`WINDOW`].
pub const PER_ACCOUNT: usize = 5;
/// How far back failures count.
pub const WINDOW: Duration = Duration::from_secs(60);

/// The client address of a request to this process: see [`client_address`].
pub fn client_of(
    state: &crate::state::AppState,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Option<IpAddr> {
    let (header, trusted) = state.config.as_ref().map_or((None, &[][..]), |config| {
        (
            config.client_ip_header.as_deref(),
            config.trusted_proxies.as_slice(),
        )
    });
    warn_of_untrusted_forwarding(headers, peer, trusted);
    client_address(headers, peer, header, trusted)
}

/// Whether `account` may try to sign in from `address` at `now`: fewer than [`PER_ADDRESS`]
/// failures from it and [`PER_ACCOUNT`] for the account from it within [`WINDOW`], as the
/// store counts them for every instance. A store that cannot say lets the attempt through
/// (the sign-in itself needs the store, and says so).
pub async fn allows(
    team: &dyn TeamStore,
    address: IpAddr,
    account: &str,
    now: DateTime<Utc>,
) -> bool {
    let since = now - window();
    match team
        .sign_in_failures(&address.to_string(), &key(account), since)
        .await
    {
        Ok((from_address, for_account)) => {
            from_address < PER_ADDRESS as u64 && for_account < PER_ACCOUNT as u64
        }
        Err(error) => {
            tracing::warn!("failed sign-ins not counted: {error}");
            true
        }
    }
}

/// A failed sign-in for `account` from `address`, kept for every instance for [`WINDOW`].
pub async fn failed(team: &dyn TeamStore, address: IpAddr, account: &str, now: DateTime<Utc>) {
    if let Err(error) = team
        .record_sign_in_failure(&address.to_string(), &key(account), now, now - window())
        .await
    {
        tracing::warn!("a failed sign-in was not recorded: {error}");
    }
}

fn window() -> chrono::Duration {
    chrono::Duration::from_std(WINDOW).unwrap_or(chrono::Duration::MAX)
}

/// An account as typed, folded: «Marta » and «marta» are one account.
fn key(account: &str) -> String {
    account.trim().to_lowercase()
}

/// The client's address: the last one in `header` (what the proxy in front appended), when
/// the deployment names such a header (`ZAGUAN_CLIENT_IP_HEADER`) and the connection comes
/// from one of its proxies (`ZAGUAN_TRUSTED_PROXIES`) — a header from anyone else is theirs to
/// forge — else the connection's peer. `None` only for a request that came through no
/// connection (served in-process, in tests): such requests are not limited.
pub fn client_address(
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    header: Option<&str>,
    trusted: &[ipnet::IpNet],
) -> Option<IpAddr> {
    let from_proxy = peer.is_some_and(|peer| trusted.iter().any(|net| net.contains(&peer.ip())));
    let from_header = header
        .filter(|_| from_proxy)
        .and_then(|name| headers.get_all(name).iter().next_back())
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.rsplit(',').next())
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    from_header.or(peer.map(|peer| peer.ip()))
}

/// Forwarding headers from a peer no setting vouches for: behind a proxy without
/// `ZAGUAN_TRUSTED_PROXIES`, every client is the proxy, and 30 failures a minute lock every
/// operator out. Said once per process, and counted.
fn warn_of_untrusted_forwarding(
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    trusted: &[ipnet::IpNet],
) {
    static SAID: std::sync::Once = std::sync::Once::new();
    let forwarded = ["x-forwarded-for", "forwarded", "x-real-ip"]
        .iter()
        .any(|name| headers.contains_key(*name));
    let vouched = peer.is_some_and(|peer| trusted.iter().any(|net| net.contains(&peer.ip())));
    if forwarded && !vouched && peer.is_some() {
        metrics::counter!("zaguan_untrusted_forwarded_requests_total").increment(1);
        SAID.call_once(|| {
            tracing::warn!(
                peer = ?peer.map(|p| p.ip()),
                "requests carry forwarding headers from a peer ZAGUAN_TRUSTED_PROXIES does not \
                 name: the peer counts as the client, so behind a proxy every client is the \
                 proxy; set ZAGUAN_TRUSTED_PROXIES (and ZAGUAN_CLIENT_IP_HEADER)"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::team::MemoryTeam;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[tokio::test]
    async fn ten_wrong_passwords_lock_only_that_account_from_that_address() {
        let team = MemoryTeam::default();
        let now = Utc::now();
        for _ in 0..10 {
            failed(&team, ip("203.0.113.7"), "Marta", now).await;
        }
        assert!(!allows(&team, ip("203.0.113.7"), "marta ", now).await);
        assert!(
            allows(&team, ip("203.0.113.7"), "Lucía", now).await,
            "another account from the same address"
        );
        assert!(
            allows(&team, ip("198.51.100.9"), "Marta", now).await,
            "the same account from another address"
        );
        assert!(
            allows(&team, ip("203.0.113.7"), "Marta", now + window()).await,
            "a minute later"
        );
    }

    #[tokio::test]
    async fn one_address_guessing_many_accounts_is_stopped() {
        let team = MemoryTeam::default();
        let now = Utc::now();
        for n in 0..PER_ADDRESS {
            failed(&team, ip("203.0.113.8"), &format!("user{n}"), now).await;
        }
        assert!(!allows(&team, ip("203.0.113.8"), "someone-new", now).await);
        assert!(allows(&team, ip("203.0.113.9"), "someone-new", now).await);
    }

    #[test]
    fn the_address_is_the_proxys_last_hop_only_from_a_trusted_proxy() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "198.51.100.1, 203.0.113.7".parse().unwrap(),
        );
        let proxy = Some("10.0.0.2:40000".parse().unwrap());
        let trusted: Vec<ipnet::IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        assert_eq!(
            client_address(&headers, proxy, Some("x-forwarded-for"), &trusted),
            Some(ip("203.0.113.7"))
        );
        assert_eq!(
            client_address(&headers, proxy, None, &trusted),
            Some(ip("10.0.0.2")),
            "no header named: the peer"
        );
        assert_eq!(
            client_address(&headers, proxy, Some("x-forwarded-for"), &[]),
            Some(ip("10.0.0.2")),
            "a header no trusted proxy vouches for is ignored"
        );
        let direct = Some("198.51.100.50:5000".parse().unwrap());
        assert_eq!(
            client_address(&headers, direct, Some("x-forwarded-for"), &trusted),
            Some(ip("198.51.100.50")),
            "a client reaching the port directly cannot forge its address"
        );
        assert_eq!(
            client_address(&HeaderMap::new(), None, Some("x-forwarded-for"), &trusted),
            None
        );
    }
}
