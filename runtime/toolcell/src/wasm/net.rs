//! The network a call may reach: `wasi:http` only, to the hosts its policy rule names.
//!
//! Raw TCP and UDP stay disabled for every call (see `wasm/sandbox.rs`). A call granted `network`
//! gets `wasi:http` requests checked by `NetworkHooks` one by one, redirects included (a
//! guest follows a redirect by making a new request, which is checked again):
//!
//! - the scheme, host and port must match one of the rule's [`HostPattern`]s;
//! - the host resolves the name itself, and refuses every non-public address
//!   ([`is_non_public`](crate::policy::is_non_public): loopback, private, link-local, CGNAT, benchmarking, documentation,
//!   multicast, reserved, NAT64 and 6to4 forms of those, ...) unless the matching pattern names
//!   that very IP address, or names `localhost` and every address is loopback, or the policy
//!   rule says `allow_private = true`. An exact DNS name is no exemption: a name can resolve
//!   to a cloud metadata address or a private network;
//! - the request is then sent by toolcell's own sender (`send_pinned`) to the addresses that
//!   were checked, never to a name: no second lookup can rebind the name to another address
//!   (a "DNS rebinding" attack), for HTTP and HTTPS alike. For HTTPS the TLS session verifies
//!   the URL's host name against the Mozilla root certificates (`webpki-roots`).
//!
//! The sender speaks HTTP/1.1 and applies the request's connect, first-byte and between-bytes
//! timeouts (without them, [`CONNECT_TIMEOUT`], [`FIRST_BYTE_TIMEOUT`], and no limit between
//! frames of the body); the call's own deadline bounds it all, since it ends the instance and
//! with it the connection.

use crate::policy::HostPattern;
use http_body_util::BodyExt as _;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// How long connecting (TCP, then TLS, then the HTTP handshake, each) may take when the guest
/// sets no connect timeout. The call's deadline still bounds the whole call.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the response head may take once the request is sent, when the guest sets no
/// first-byte timeout. The call's deadline still bounds the whole call.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// The `wasi:http` hooks of one call: its allowlist, checked on every request.
#[derive(Debug, Clone, Default)]
pub(crate) struct NetworkHooks {
    allowed: Arc<Vec<HostPattern>>,
}

impl NetworkHooks {
    pub(crate) fn new(allowed: Arc<Vec<HostPattern>>) -> Self {
        NetworkHooks { allowed }
    }
}

type SendResult = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

impl WasiHttpHooks for NetworkHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        let allowed = Arc::clone(&self.allowed);
        Box::new(async move {
            let uri = request.uri().clone();
            let destination = checked(&uri, &allowed).await?;
            let (response, io) = send_pinned(request, destination, options).await?;
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// Where a checked request may go: the addresses its host resolved to when it was checked,
/// and for HTTPS how to verify the server.
#[derive(Debug)]
pub(crate) struct Destination {
    addresses: Vec<SocketAddr>,
    tls: Option<Tls>,
}

/// How an HTTPS server is verified: the name its certificate must carry, and the client
/// configuration (the roots trusted).
#[derive(Debug)]
struct Tls {
    name: rustls::pki_types::ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
}

/// The destination of a request for `uri`, if the allowlist lets it go there.
async fn checked(uri: &http::Uri, allowed: &[HostPattern]) -> Result<Destination, Error> {
    let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
    let host = uri
        .host()
        .ok_or(Error::HttpRequestUriInvalid)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    let Some(pattern) = allowed.iter().find(|p| p.matches(&scheme, &host, port)) else {
        return Err(Error::HttpRequestDenied);
    };
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|_| Error::DnsError {
            rcode: None,
            info_code: None,
        })?
        .collect();
    if addresses.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    let ips: Vec<IpAddr> = addresses.iter().map(SocketAddr::ip).collect();
    if !pattern.may_reach(&ips) {
        return Err(Error::DestinationIpProhibited);
    }
    let tls = if scheme == "https" {
        // An IP literal is verified as an IP address, anything else as a DNS name.
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let config = WEB_PKI
            .as_ref()
            .map_err(|why| Error::InternalError(Some(why.clone())))?;
        Some(Tls {
            name,
            config: Arc::clone(config),
        })
    } else {
        None
    };
    Ok(Destination { addresses, tls })
}

/// The client side of TLS, made once: the Mozilla root certificates, ring's cryptography, and
/// rustls's safe protocol versions.
static WEB_PKI: LazyLock<Result<Arc<rustls::ClientConfig>, String>> = LazyLock::new(|| {
    client_config(rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
});

/// A TLS client configuration trusting `roots`.
fn client_config(roots: rustls::RootCertStore) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
        .map_err(|error| error.to_string())
}

/// A connection toolcell can speak HTTP over: TCP, or TLS over TCP.
trait Connection: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Connection for T {}

type IoFuture = std::pin::Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// Send `request` to `destination`'s checked addresses (the first that accepts a connection),
/// over TLS for `https`. Returns the response and the future that drives the rest of the
/// connection (the body) to its end.
pub(crate) async fn send_pinned(
    mut request: http::Request<WasiBody>,
    destination: Destination,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(CONNECT_TIMEOUT);
    let first_byte_timeout = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(FIRST_BYTE_TIMEOUT);
    let between_bytes_timeout = options.and_then(|o| o.between_bytes_timeout);

    // Each step of connecting (TCP, TLS, the HTTP handshake) gets the connect timeout.
    let tcp = tokio::time::timeout(connect_timeout, connect_any(&destination.addresses))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let stream: Box<dyn Connection> = match destination.tls {
        Some(Tls { name, config }) => {
            let connector = tokio_rustls::TlsConnector::from(config);
            let tls = tokio::time::timeout(connect_timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
        None => Box::new(tcp),
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // On the wire a request names only its path (origin form); the host is in its `Host`
    // header, which wasmtime-wasi-http set from the URL.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;

    // The connection must be driven while the response head is awaited.
    let mut connection = Box::pin(connection);
    let mut connection_ended = false;
    let send = tokio::time::timeout(first_byte_timeout, sender.send_request(request));
    tokio::pin!(send);
    let response = loop {
        tokio::select! {
            response = &mut send => {
                break response.map_err(|_| Error::ConnectionReadTimeout)??;
            }
            ended = &mut connection, if !connection_ended => {
                connection_ended = true;
                ended?;
            }
        }
    };
    let io: IoFuture = Box::pin(async move {
        if !connection_ended {
            connection.await?;
        }
        Ok(())
    });
    Ok((
        response.map(|body| Paced::new(body, between_bytes_timeout).boxed_unsync()),
        io,
    ))
}

/// A response body that fails with [`Error::ConnectionReadTimeout`] when its next frame takes
/// longer than `between` (if set) to arrive.
struct Paced {
    incoming: hyper::body::Incoming,
    between: Option<Duration>,
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Paced {
    fn new(incoming: hyper::body::Incoming, between: Option<Duration>) -> Self {
        let timer = between.map(|between| Box::pin(tokio::time::sleep(between)));
        Paced {
            incoming,
            between,
            timer,
        }
    }
}

impl hyper::body::Body for Paced {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(timer), Some(between)) = (this.timer.as_mut(), this.between) {
                    timer.as_mut().reset(tokio::time::Instant::now() + between);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(Error::from(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.timer.as_mut().map(|timer| timer.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                _ => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.incoming.size_hint()
    }
}

/// A TCP connection to the first of `addresses` that accepts one.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, Error> {
    let mut last = Error::DestinationNotFound;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = Error::ConnectionRefused;
            }
            Err(error) => last = Error::Connect(error),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener on loopback that records the first bytes of one connection and, if asked,
    /// answers them with a small HTTP response.
    fn listener(answer: bool) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let first = std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return Vec::new();
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut bytes = vec![0; 4096];
            let read = stream.read(&mut bytes).unwrap_or(0);
            bytes.truncate(read);
            if answer {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            }
            bytes
        });
        (addr, first)
    }

    fn request(url: &str) -> http::Request<WasiBody> {
        let body = http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let host = url.split('/').nth(2).unwrap_or_default().to_owned();
        http::Request::builder()
            .uri(url)
            .header(http::header::HOST, host)
            .body(body)
            .expect("request")
    }

    /// GET `url` from `destination`, expecting a 200 and a clean end of the connection; the
    /// body.
    async fn get_ok(url: &str, destination: Destination) -> bytes::Bytes {
        let (response, io) = send_pinned(request(url), destination, None)
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.expect("body");
        io.await.expect("the connection ends cleanly");
        body.to_bytes()
    }

    /// The sender goes to the checked addresses and never looks the name up again: the names
    /// here resolve nowhere (`.invalid` is reserved for that), yet the requests arrive.
    #[tokio::test]
    async fn the_sender_connects_to_the_checked_address_not_to_the_name() {
        let (addr, first) = listener(true);
        let destination = Destination {
            addresses: vec![addr],
            tls: None,
        };
        let body = get_ok("http://pinned.invalid/x", destination).await;
        assert_eq!(&body[..], b"ok");
        let sent = String::from_utf8(first.join().expect("listener")).expect("text");
        assert!(sent.starts_with("GET /x HTTP/1.1\r\n"), "{sent}");
        assert!(sent.contains("host: pinned.invalid\r\n"), "{sent}");

        let (addr, first) = listener(false);
        let destination = Destination {
            addresses: vec![addr],
            tls: Some(Tls {
                name: name("pinned.invalid"),
                config: WEB_PKI.clone().expect("the web PKI client config"),
            }),
        };
        let error = send_pinned(request("https://pinned.invalid/x"), destination, None)
            .await
            .err()
            .expect("the listener speaks no TLS");
        assert!(matches!(error, Error::Tls(_)), "{error:?}");
        let hello = first.join().expect("listener");
        assert_eq!(hello.first(), Some(&0x16), "a TLS handshake record");
        assert!(
            hello.windows(14).any(|w| w == b"pinned.invalid"),
            "the ClientHello names the host to verify"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_typed_error() {
        // Bind, learn the port, close: nothing listens there now.
        let addr = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|listener| listener.local_addr())
            .expect("addr");
        let destination = Destination {
            addresses: vec![addr],
            tls: None,
        };
        let error = send_pinned(request("http://pinned.invalid/"), destination, None)
            .await
            .err()
            .expect("refused");
        assert!(matches!(error, Error::ConnectionRefused), "{error:?}");
    }

    fn name(text: &str) -> rustls::pki_types::ServerName<'static> {
        rustls::pki_types::ServerName::try_from(text.to_owned()).expect("name")
    }

    /// An HTTPS server on loopback with a certificate for `pinned.invalid`, from a CA only
    /// this test trusts; it answers one request.
    async fn tls_server() -> (SocketAddr, rustls::RootCertStore) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["pinned.invalid".to_owned()])
                .expect("certificate");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).expect("root");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut request = Vec::new();
            let mut buffer = [0; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => request.extend_from_slice(&buffer[..read]),
                }
            }
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecret")
                .await;
            let _ = tls.shutdown().await;
        });
        (addr, roots)
    }

    /// A whole HTTPS exchange through the pinned sender: the certificate is verified against
    /// the name, and a certificate for another name is refused.
    #[tokio::test]
    async fn https_through_the_pinned_sender_verifies_the_certificate() {
        let (addr, roots) = tls_server().await;
        let destination = Destination {
            addresses: vec![addr],
            tls: Some(Tls {
                name: name("pinned.invalid"),
                config: client_config(roots).expect("client config"),
            }),
        };
        let body = get_ok("https://pinned.invalid/", destination).await;
        assert_eq!(&body[..], b"secret");

        let (addr, roots) = tls_server().await;
        let destination = Destination {
            addresses: vec![addr],
            tls: Some(Tls {
                name: name("other.invalid"),
                config: client_config(roots).expect("client config"),
            }),
        };
        let error = send_pinned(request("https://other.invalid/"), destination, None)
            .await
            .err()
            .expect("the certificate names another host");
        assert!(matches!(error, Error::Tls(_)), "{error:?}");
    }

    /// A body that stalls between frames ends with a read timeout when the request asked for
    /// one, instead of holding the call until its deadline.
    #[tokio::test]
    async fn a_stalled_body_ends_at_the_between_bytes_timeout() {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut bytes = [0; 4096];
            let _ = stream.read(&mut bytes);
            // Promise ten bytes, send two, then stall until the test is done.
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nok");
            let _ = done_rx.recv_timeout(Duration::from_secs(10));
        });
        let destination = Destination {
            addresses: vec![addr],
            tls: None,
        };
        let options = RequestOptions {
            between_bytes_timeout: Some(Duration::from_millis(100)),
            ..RequestOptions::default()
        };
        let (response, io) = send_pinned(
            request("http://pinned.invalid/"),
            destination,
            Some(options),
        )
        .await
        .expect("sent");
        tokio::spawn(io);
        let started = std::time::Instant::now();
        let error = response.into_body().collect().await.expect_err("stalled");
        assert!(matches!(error, Error::ConnectionReadTimeout), "{error:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let _ = done_tx.send(());
        server.join().expect("server");
    }
}
