//! A TCP proxy in front of MongoDB that plays the unkind database: slow answers, a stall (bytes
//! held, connections open), a cut (every connection dropped, new ones refused), or existing
//! connections frozen while new ones work (half-open sockets after a failover or a NAT drop).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to traffic right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Bytes flow as they come.
    Pass,
    /// Every chunk the database sends is held this long first.
    Slow(Duration),
    /// Nothing flows either way; connections stay open.
    Stall,
    /// Every connection is closed and new ones are refused.
    Cut,
    /// Connections opened before this mode was set stall; new ones flow.
    FreezeExisting,
}

pub struct MongoProxy {
    pub port: u16,
    mode: watch::Sender<(Mode, u64)>,
    /// Connections accepted so far: each is numbered, so a freeze knows which are old.
    accepted: Arc<AtomicU64>,
}

impl MongoProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, _) = watch::channel((Mode::Pass, 0u64));
        let accepted = Arc::new(AtomicU64::new(0));
        let (modes, counter) = (mode.clone(), accepted.clone());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let number = counter.fetch_add(1, Ordering::SeqCst);
                if modes.borrow().0 == Mode::Cut {
                    drop(client);
                    continue;
                }
                let (upstream, modes) = (upstream.clone(), modes.subscribe());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = pump(client_read, server_write, modes.clone(), number, false);
                    let down = pump(server_read, client_write, modes, number, true);
                    tokio::select! {
                        () = up => {}
                        () = down => {}
                    }
                });
            }
        });
        Self {
            port,
            mode,
            accepted,
        }
    }

    /// `host:port` of a single-host `mongodb://` URI.
    pub fn host_of(uri: &str) -> String {
        let rest = uri
            .strip_prefix("mongodb://")
            .expect("the proxy needs a mongodb:// URI");
        let hosts = rest.split(['/', '?']).next().unwrap();
        let host = hosts.rsplit('@').next().unwrap();
        assert!(!host.contains(','), "the proxy needs a single-host URI");
        host.to_owned()
    }

    /// A `mongodb://` URI through the proxy, with `options` (`a=1&b=2`) if any.
    pub fn uri(&self, options: &str) -> String {
        let query = if options.is_empty() {
            String::new()
        } else {
            format!("?{options}")
        };
        format!("mongodb://127.0.0.1:{}/{query}", self.port)
    }

    pub fn set(&self, mode: Mode) {
        let accepted = self.accepted.load(Ordering::SeqCst);
        self.mode.send_replace((mode, accepted));
    }
}

/// Copies `from` to `to` while the mode lets this connection's bytes through.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut modes: watch::Receiver<(Mode, u64)>,
    number: u64,
    answers: bool,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // Held before reading, so a stalled connection also stops taking bytes in.
        loop {
            let (mode, since) = *modes.borrow_and_update();
            let held = match mode {
                Mode::Cut => return,
                Mode::Stall => true,
                Mode::FreezeExisting => number < since,
                Mode::Pass | Mode::Slow(_) => false,
            };
            if !held {
                break;
            }
            if modes.changed().await.is_err() {
                return;
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = modes.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        let slow = match *modes.borrow() {
            (Mode::Slow(delay), _) if answers => Some(delay),
            _ => None,
        };
        if let Some(delay) = slow {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
