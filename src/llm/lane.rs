//! The model calls' own HTTP/2 connections, spoken with the `h2` crate directly.
//!
//! A turn waiting on the model is mostly its call in flight, and thousands wait at once. Through
//! reqwest a waiting call held about 10 KB: its boxed pending request, the retry and redirect
//! layers, hyper's pool checkout and dispatch channel, and a task piping the body. Here a call
//! is an HTTP/2 stream on a shared connection and the future that reads its answer: the body is
//! handed to the connection, which sends it as the server's window allows and frees it.
//!
//! Only where HTTP/2 is certain: `LLM_HTTP2=prior-knowledge` (h2c, or TLS with ALPN `h2`), and
//! `auto` over `https` as long as the server offers `h2` (OpenAI's and Anthropic's APIs do).
//! A server that answers with HTTP/1.1, or a proxy in the environment, leaves the calls to
//! reqwest ([`super::http::Clients`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use url::Url;

/// The largest answer read: a chat completion is a few KiB; more is a broken server.
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// An idle connection is pinged this often, and dropped when the pong is later than
/// [`PING_TIMEOUT`]: a connection lost without a reset would otherwise hold every call sent on
/// it until its timeout.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Receive windows: answers are small, and many share a connection.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

/// Why a call on the lane failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaneError {
    /// The server chose HTTP/1.1 in the TLS handshake: the calls go to reqwest instead.
    /// It comes back with the request, which was not sent.
    #[error("the server does not speak HTTP/2")]
    NotHttp2(Box<Outgoing>),
    #[error("timed out")]
    Timeout,
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("transport error: {0}")]
    Transport(String),
    #[error("the answer is larger than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
}

/// A request not sent yet. Boxed: each future on its way to the connection keeps a pointer to
/// it, not its 120 bytes, and it is freed once the stream has it.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// Besides the content type and length.
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Outgoing {
    pub(crate) fn new(headers: HeaderMap, body: Bytes) -> Box<Self> {
        Box::new(Self { headers, body })
    }
}

/// HTTP/2 connections to one model endpoint, one per [`super::http::STREAMS_PER_CONNECTION`]
/// calls in flight, used round robin and reopened when they close.
pub(crate) struct Lane {
    uri: Uri,
    host: String,
    port: u16,
    /// `None` for h2c.
    tls: Option<tokio_rustls::TlsConnector>,
    slots: Box<[Mutex<Option<Connection>>]>,
    next: AtomicU64,
    timeout: Duration,
}

/// One open connection: its handle for new streams, and whether it is to be reopened (its task
/// has ended, or a stream could not be opened on it).
#[derive(Clone)]
struct Connection {
    streams: SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

impl Lane {
    /// A lane to `endpoint` over `connections` connections; `timeout` bounds each whole call.
    /// `None` when the endpoint cannot be spoken to this way (a proxy is set for it, or it is
    /// plain `http` without prior knowledge).
    pub(crate) fn new(
        endpoint: &Url,
        prior_knowledge: bool,
        connections: usize,
        timeout: Duration,
    ) -> Option<Self> {
        let tls = match endpoint.scheme() {
            "https" => Some(tokio_rustls::TlsConnector::from(tls_config())),
            "http" if prior_knowledge => None,
            _ => return None,
        };
        if proxied(endpoint.scheme()) {
            return None;
        }
        Some(Self {
            uri: endpoint.as_str().parse().ok()?,
            // An IPv6 address without its URL brackets, as connecting and TLS take it.
            host: match endpoint.host()? {
                url::Host::Domain(name) => name.to_owned(),
                url::Host::Ipv4(address) => address.to_string(),
                url::Host::Ipv6(address) => address.to_string(),
            },
            port: endpoint.port_or_known_default()?,
            tls,
            slots: (0..connections.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicU64::new(0),
            timeout,
        })
    }

    /// With `root` trusted as well as the public roots: for a test server's own certificate.
    #[cfg(test)]
    fn trusting(mut self, root: rustls::pki_types::CertificateDer<'static>) -> Self {
        let mut roots = public_roots();
        roots.add(root).expect("a valid test certificate");
        self.tls = Some(tokio_rustls::TlsConnector::from(Arc::new(config_with(
            roots,
        ))));
        self
    }

    /// POSTs `outgoing` and reads the whole answer.
    pub(crate) async fn post(
        &self,
        outgoing: Box<Outgoing>,
    ) -> Result<(StatusCode, Bytes), LaneError> {
        tokio::time::timeout(self.timeout, self.exchange(outgoing))
            .await
            .map_err(|_| LaneError::Timeout)?
    }

    /// The request, its stream and the answer's head live in blocks of their own: a local in
    /// scope keeps its room in the future across every later wait, moved or not.
    async fn exchange(&self, outgoing: Box<Outgoing>) -> Result<(StatusCode, Bytes), LaneError> {
        let slot =
            &self.slots[self.next.fetch_add(1, Ordering::Relaxed) as usize % self.slots.len()];
        // Waits while the connection carries as many streams as the server allows; once more
        // on a new connection if it closed since it was taken.
        let mut retried = false;
        let mut streams = loop {
            let connection = match self.streams(slot).await {
                Ok(connection) => connection,
                Err(LaneError::NotHttp2(_)) => return Err(LaneError::NotHttp2(outgoing)),
                Err(error) => return Err(error),
            };
            match connection.streams.ready().await {
                Ok(streams) => break streams,
                Err(error) if !retried => {
                    tracing::debug!(%error, "LLM HTTP/2 connection closed, reopening");
                    connection.closed.store(true, Ordering::Release);
                    retried = true;
                }
                Err(error) => return Err(transport(error)),
            }
        };
        let answer = {
            let outgoing = outgoing;
            let Outgoing { headers, body } = *outgoing;
            let mut request = Request::new(());
            *request.method_mut() = Method::POST;
            *request.uri_mut() = self.uri.clone();
            *request.headers_mut() = headers;
            request.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            request
                .headers_mut()
                .insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
            let (answer, mut send) = streams.send_request(request, false).map_err(transport)?;
            // Buffered by the connection and sent as the server's window allows, then freed.
            send.send_data(body, true).map_err(transport)?;
            answer
        };
        drop(streams);
        let (status, mut body) = {
            let answer = answer.await.map_err(transport)?;
            (answer.status(), answer.into_body())
        };
        let mut read = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(transport)?;
            if read.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(LaneError::TooLarge);
            }
            read.extend_from_slice(&chunk);
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        Ok((status, read.freeze()))
    }

    /// The slot's connection, opened if it has none or its connection has closed. The slot is
    /// held while connecting, so calls arriving meanwhile wait for that connection rather than
    /// opening their own.
    async fn streams(&self, slot: &Mutex<Option<Connection>>) -> Result<Connection, LaneError> {
        let mut slot = slot.lock().await;
        if let Some(connection) = slot.as_ref()
            && !connection.closed.load(Ordering::Acquire)
        {
            return Ok(connection.clone());
        }
        // Boxed: connecting (TCP, TLS, the handshake) is rare and its future large, and a
        // waiting call's future would otherwise keep room for it.
        let connection = Box::pin(self.connect()).await?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    async fn connect(&self) -> Result<Connection, LaneError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| LaneError::Connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(tcp).await,
            Some(tls) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| LaneError::Connect(e.to_string()))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| LaneError::Connect(e.to_string()))?;
                if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(LaneError::NotHttp2(Outgoing::new(
                        HeaderMap::new(),
                        Bytes::new(),
                    )));
                }
                handshake(stream).await
            }
        }
    }
}

/// The HTTP/2 handshake on `io`, and the connection's task: it drives the streams, pings while
/// idle, and marks the connection closed when it ends.
async fn handshake<T>(io: T) -> Result<Connection, LaneError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (streams, mut connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| LaneError::Connect(e.to_string()))?;
    let closed = Arc::new(AtomicBool::new(false));
    let ping = connection.ping_pong();
    let marker = closed.clone();
    tokio::spawn(async move {
        let ended = tokio::select! {
            ended = connection => ended.map_err(|e| e.to_string()),
            lost = keep_alive(ping) => Err(lost),
        };
        marker.store(true, Ordering::Release);
        match ended {
            Ok(()) => tracing::debug!("LLM HTTP/2 connection closed"),
            Err(error) => tracing::info!(%error, "LLM HTTP/2 connection lost"),
        }
    });
    Ok(Connection { streams, closed })
}

/// Pings every [`PING_INTERVAL`]; returns why the connection is to be dropped.
async fn keep_alive(ping: Option<h2::PingPong>) -> String {
    let Some(mut ping) = ping else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(PING_INTERVAL).await;
        match tokio::time::timeout(PING_TIMEOUT, ping.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => return format!("ping failed: {error}"),
            Err(_) => return format!("no answer to a ping in {PING_TIMEOUT:?}"),
        }
    }
}

fn transport(error: h2::Error) -> LaneError {
    LaneError::Transport(error.to_string())
}

/// Whether the environment routes `scheme` through a proxy, as reqwest would read it.
fn proxied(scheme: &str) -> bool {
    let names: &[&str] = match scheme {
        "https" => &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"],
        _ => &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"],
    };
    names
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

/// One TLS configuration for every lane: the public roots reqwest trusts too (webpki-roots),
/// ALPN offering `h2` first.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| Arc::new(config_with(public_roots())))
        .clone()
}

fn public_roots() -> rustls::RootCertStore {
    rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned())
}

fn config_with(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::net::TcpListener;

    /// What a test server does with each request on a connection.
    #[derive(Clone, Copy)]
    enum Behaviour {
        /// Answers `{"echo": <the body's length>}` with the request's authorization header.
        Echo,
        /// Answers, then closes the connection (GOAWAY): the next call needs a new one.
        EchoThenClose,
        /// Never answers.
        Silent,
        /// Answers more than the lane reads.
        Huge,
    }

    /// Serves HTTP/2 on `listener` (over TLS when `tls` is given); counts connections.
    fn serve(
        listener: TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        behaviour: Behaviour,
        connections: Arc<AtomicUsize>,
    ) {
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                connections.fetch_add(1, Ordering::SeqCst);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(tcp, behaviour).await,
                        Some(tls) => {
                            let Ok(stream) = tls.accept(tcp).await else {
                                return;
                            };
                            serve_connection(stream, behaviour).await
                        }
                    }
                });
            }
        });
    }

    async fn serve_connection<T>(io: T, behaviour: Behaviour)
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let Ok(mut connection) = h2::server::handshake(io).await else {
            return;
        };
        // The connection is driven by `accept`, so each request is answered on its own task.
        while let Some(Ok((request, respond))) = connection.accept().await {
            if let Behaviour::EchoThenClose = behaviour {
                // GOAWAY: this stream is answered, no new one is taken.
                connection.graceful_shutdown();
            }
            tokio::spawn(answer(request, respond, behaviour));
        }
    }

    async fn answer(
        request: http::Request<h2::RecvStream>,
        mut respond: h2::server::SendResponse<Bytes>,
        behaviour: Behaviour,
    ) {
        let auth = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let mut body = request.into_body();
        let mut length = 0;
        while let Some(Ok(chunk)) = body.data().await {
            length += chunk.len();
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let answer = match behaviour {
            Behaviour::Silent => {
                // Held open, never answered.
                std::future::pending::<()>().await;
                return;
            }
            Behaviour::Huge => Bytes::from(vec![b' '; MAX_ANSWER_BYTES + 1]),
            _ => Bytes::from(format!(r#"{{"echo":{length},"auth":"{auth}"}}"#)),
        };
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut send = respond.send_response(response, false).unwrap();
        send.send_data(answer, true).unwrap();
    }

    fn headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer k"),
        );
        headers
    }

    fn post(body: Bytes) -> Box<Outgoing> {
        Outgoing::new(headers(), body)
    }

    async fn h2c(behaviour: Behaviour, timeout: Duration) -> (Lane, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        ))
        .unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        serve(listener, None, behaviour, connections.clone());
        let lane = Lane::new(&url, true, 2, timeout).expect("h2c with prior knowledge");
        (lane, connections)
    }

    #[tokio::test]
    async fn calls_share_the_connections_and_carry_headers_and_body() {
        let (lane, connections) = h2c(Behaviour::Echo, Duration::from_secs(5)).await;
        let lane = Arc::new(lane);
        let calls: Vec<_> = (0..20)
            .map(|n| {
                let lane = lane.clone();
                tokio::spawn(
                    async move { lane.post(post(Bytes::from(vec![b'x'; 1000 * n]))).await },
                )
            })
            .collect();
        for (n, call) in calls.into_iter().enumerate() {
            let (status, body) = call.await.unwrap().unwrap();
            assert_eq!(status, StatusCode::OK);
            let expected = format!(r#"{{"echo":{},"auth":"Bearer k"}}"#, 1000 * n);
            assert_eq!(body, expected.as_bytes());
        }
        assert_eq!(
            connections.load(Ordering::SeqCst),
            2,
            "two slots, two connections"
        );
    }

    #[tokio::test]
    async fn a_closed_connection_is_reopened() {
        let (lane, connections) = h2c(Behaviour::EchoThenClose, Duration::from_secs(5)).await;
        for _ in 0..6 {
            let (status, _) = lane.post(post(Bytes::from_static(b"{}"))).await.unwrap();
            assert_eq!(status, StatusCode::OK);
        }
        assert!(
            connections.load(Ordering::SeqCst) >= 3,
            "each connection served one call"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_a_huge_answer_is_refused() {
        let (lane, _) = h2c(Behaviour::Silent, Duration::from_millis(300)).await;
        let error = lane
            .post(post(Bytes::from_static(b"{}")))
            .await
            .unwrap_err();
        assert!(matches!(error, LaneError::Timeout), "{error}");

        let (lane, _) = h2c(Behaviour::Huge, Duration::from_secs(5)).await;
        let error = lane
            .post(post(Bytes::from_static(b"{}")))
            .await
            .unwrap_err();
        assert!(matches!(error, LaneError::TooLarge), "{error}");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let lane = Lane::new(&url, true, 1, Duration::from_secs(5)).unwrap();
        let error = lane.post(post(Bytes::new())).await.unwrap_err();
        assert!(matches!(error, LaneError::Connect(_)), "{error}");
    }

    /// A TLS server for `localhost` with its own certificate, offering `alpn`.
    fn tls_server(
        alpn: &[&[u8]],
    ) -> (
        tokio_rustls::TlsAcceptor,
        rustls::pki_types::CertificateDer<'static>,
    ) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = certified.cert.der().clone();
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        (tokio_rustls::TlsAcceptor::from(Arc::new(config)), cert)
    }

    #[tokio::test]
    async fn over_tls_the_server_must_choose_h2() {
        for (alpn, speaks_h2) in [
            (&[b"h2".as_slice()][..], true),
            (&[b"http/1.1".as_slice()][..], false),
        ] {
            let (acceptor, cert) = tls_server(alpn);
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            serve(listener, Some(acceptor), Behaviour::Echo, Arc::default());
            let url = Url::parse(&format!("https://localhost:{port}/v1/messages")).unwrap();
            // `auto`: no prior knowledge, the server's ALPN decides.
            let lane = Lane::new(&url, false, 1, Duration::from_secs(5))
                .unwrap()
                .trusting(cert);
            let result = lane.post(post(Bytes::from_static(b"{\"a\":1}"))).await;
            if speaks_h2 {
                let (status, body) = result.unwrap();
                assert_eq!(status, StatusCode::OK);
                assert_eq!(body, r#"{"echo":7,"auth":"Bearer k"}"#.as_bytes());
            } else {
                // The request comes back unsent, for reqwest to send over HTTP/1.1.
                let Err(LaneError::NotHttp2(outgoing)) = result else {
                    panic!("expected NotHttp2, got {result:?}")
                };
                assert_eq!(outgoing.body, b"{\"a\":1}".as_slice());
                assert_eq!(outgoing.headers[http::header::AUTHORIZATION], "Bearer k");
            }
        }
    }

    #[test]
    fn a_waiting_call_is_small() {
        let url = Url::parse("http://127.0.0.1:9/v1").unwrap();
        let lane = Lane::new(&url, true, 1, Duration::from_secs(1)).unwrap();
        let call = lane.post(post(Bytes::new()));
        // What a call waiting on the model holds besides its stream: the request was sent.
        assert!(
            std::mem::size_of_val(&call) <= 400,
            "{}",
            std::mem::size_of_val(&call)
        );
    }

    #[test]
    fn plain_http_without_prior_knowledge_is_not_for_the_lane() {
        let url = Url::parse("http://127.0.0.1:9/v1").unwrap();
        assert!(Lane::new(&url, false, 1, Duration::from_secs(1)).is_none());
        assert!(Lane::new(&url, true, 1, Duration::from_secs(1)).is_some());
        let ipv6 = Url::parse("http://[::1]:9/v1").unwrap();
        assert_eq!(
            Lane::new(&ipv6, true, 1, Duration::from_secs(1))
                .unwrap()
                .host,
            "::1"
        );
    }
}
