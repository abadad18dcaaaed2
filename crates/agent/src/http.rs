//! A small HTTP/1.1 server for `/metrics` and `/probe`, written for
//! hostile clients: a request head of at most 8 KB read within 5 s, at
//! most 64 connections in all and 8 per peer address (more get a 503 at
//! once, without being read), one request per connection, GET and HEAD
//! only. A flood from one address cannot take the slots of others.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const MAX_HEAD_BYTES: usize = 8 * 1024;
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_PER_PEER: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub peer: SocketAddr,
}

impl Request {
    /// A GET of `path` with `query` from a loopback peer, for tests.
    #[cfg(test)]
    pub(crate) fn get(path: &str, query: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            path: path.into(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            headers: Vec::new(),
            peer: "127.0.0.1:1".parse().unwrap(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, k: &'static str, v: String) -> Response {
        self.headers.push((k, v));
        self
    }

    fn write_to(&self, w: &mut dyn Write, head_only: bool) -> std::io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        w.write_all(head.as_bytes())?;
        if !head_only {
            w.write_all(self.body.as_bytes())?;
        }
        w.flush()
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// A request head, or the status to refuse it with.
pub fn parse_head(head: &str, peer: SocketAddr) -> Result<Request, (u16, String)> {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => {
            return Err((
                400,
                format!(
                    "request line '{}' is not 'METHOD PATH HTTP/1.x'",
                    first.escape_debug()
                ),
            ))
        }
    };
    if !version.starts_with("HTTP/1.") {
        return Err((
            400,
            format!("unsupported protocol '{}'", version.escape_debug()),
        ));
    }
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err((
                400,
                format!("header line '{}' has no ':'", l.escape_debug()),
            ));
        };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    if !target.starts_with('/') {
        return Err((
            400,
            format!(
                "request target '{}' is not a path (origin form, /...)",
                target.escape_debug()
            ),
        ));
    }
    let (path, q) = target.split_once('?').unwrap_or((target, ""));
    let mut query = Vec::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = percent_decode(k).ok_or((
            400,
            format!(
                "query parameter '{}' is badly percent-encoded",
                k.escape_debug()
            ),
        ))?;
        let v =
            percent_decode(v).ok_or((400, format!("value of '{k}' is badly percent-encoded")))?;
        query.push((k, v));
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query,
        headers,
        peer,
    })
}

/// `%41` -> `A`, `+` -> space; `None` for a bad escape or bytes that are
/// not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Reads a request head (up to the blank line) within the deadline.
fn read_head(s: &mut TcpStream) -> Result<String, (u16, String)> {
    let started = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let left = HEAD_DEADLINE.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err((408, "the request head did not arrive within 5 s".into()));
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => {
                return Err((
                    400,
                    "the connection closed before the request head ended".into(),
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err((408, "the request head did not arrive within 5 s".into()))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err((400, format!("reading the request: {e}"))),
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            // A head that came whole in one read is held to the limit too.
            if end + 4 > MAX_HEAD_BYTES {
                return Err((
                    431,
                    format!("the request head is longer than {MAX_HEAD_BYTES} bytes"),
                ));
            }
            return String::from_utf8(buf[..end].to_vec())
                .map_err(|_| (400, "the request head is not UTF-8".into()));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err((
                431,
                format!("the request head is longer than {MAX_HEAD_BYTES} bytes"),
            ));
        }
    }
}

pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;
/// Told each answered request's path (as [`known_path`] names it) and status.
pub type OnDone = dyn Fn(&'static str, u16) + Send + Sync;

/// Counts of connections open, in all and per peer address.
#[derive(Default)]
struct Slots {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

struct Slot {
    slots: Arc<Mutex<Slots>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        s.total -= 1;
        if let Some(n) = s.per_peer.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                s.per_peer.remove(&self.ip);
            }
        }
    }
}

/// Serves until `stop` is set; `on_done(path, status)` counts requests.
pub fn serve(
    listener: TcpListener,
    handler: Arc<Handler>,
    on_done: Arc<OnDone>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let slots: Arc<Mutex<Slots>> = Arc::default();
    let lingering = spawn_closer(stop.clone());
    while !stop.load(Ordering::SeqCst) {
        let (mut stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                ) =>
            {
                continue
            }
            Err(e) => {
                // Out of descriptors and the like: back off, keep serving.
                eprintln!("tightlink agent: accept: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let ip = peer.ip();
        let admitted = {
            let mut s = slots.lock().unwrap_or_else(|p| p.into_inner());
            let mine = s.per_peer.get(&ip).copied().unwrap_or(0);
            if s.total >= MAX_CONNECTIONS || mine >= MAX_PER_PEER {
                false
            } else {
                s.total += 1;
                *s.per_peer.entry(ip).or_insert(0) += 1;
                true
            }
        };
        if !admitted {
            // Refused unread: a short answer fits the socket buffer, so
            // this write does not wait on the client.
            let _ = stream.set_nonblocking(true);
            let _ = Response::text(503, "too many connections; try again later\n")
                .with_header("Retry-After", "1".into())
                .write_to(&mut stream, false);
            let _ = stream.shutdown(std::net::Shutdown::Write);
            if lingering.try_send(stream).is_err() {
                // Too many being closed: drop it (the client may see a reset).
            }
            on_done("(refused)", 503);
            continue;
        }
        let slot = Slot {
            slots: slots.clone(),
            ip,
        };
        let handler = handler.clone();
        let on_done = on_done.clone();
        let spawned = std::thread::Builder::new()
            .name("agent-http".into())
            .spawn(move || {
                let _slot = slot;
                let (resp, head_only, path) =
                    match read_head(&mut stream).and_then(|h| parse_head(&h, peer)) {
                        Ok(req) => {
                            let head_only = req.method == "HEAD";
                            let resp = if req.method == "GET" || head_only {
                                handler(&req)
                            } else {
                                Response::text(
                                    405,
                                    format!("{} is not served here; use GET\n", req.method),
                                )
                                .with_header("Allow", "GET, HEAD".into())
                            };
                            (resp, head_only, known_path(&req.path))
                        }
                        Err((status, why)) => (
                            Response::text(status, format!("{why}\n")),
                            false,
                            "(bad request)",
                        ),
                    };
                let _ = resp.write_to(&mut stream, head_only);
                on_done(path, resp.status);
            });
        if let Err(e) = spawned {
            eprintln!("tightlink agent: cannot start a connection thread: {e}");
        }
    }
    Ok(())
}

/// Refused connections, answered and shut for writing, are read until
/// the client closes (at most 1 s and 16 KB each, 256 at once) before
/// they are closed: closing a socket with an unread request makes the
/// kernel send a reset, which can destroy the answer before the client
/// reads it.
fn spawn_closer(stop: Arc<AtomicBool>) -> std::sync::mpsc::SyncSender<TcpStream> {
    const MAX: usize = 256;
    let (tx, rx) = std::sync::mpsc::sync_channel::<TcpStream>(MAX);
    std::thread::spawn(move || {
        let mut open: Vec<(TcpStream, Instant, usize)> = Vec::new();
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            while open.len() < MAX {
                match rx.try_recv() {
                    Ok(s) => open.push((s, Instant::now(), 0)),
                    Err(_) => break,
                }
            }
            open.retain_mut(|(s, since, read)| {
                if since.elapsed() > Duration::from_secs(1) || *read > 16 * 1024 {
                    return false;
                }
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => return false,
                        Ok(n) => *read += n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(_) => return false,
                    }
                }
            });
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    tx
}

/// A far agent's page over HTTP/1.1 (`GET path`, `Connection: close`),
/// trusting nothing: the whole exchange within `deadline`, at most
/// `max_bytes` of response, a status other than 200 an error that says
/// it. For the mesh page's rows of other sites.
pub fn get(addr: &str, path: &str, deadline: Duration, max_bytes: usize) -> Result<String, String> {
    use std::net::ToSocketAddrs;
    let start = Instant::now();
    let to = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut conn = TcpStream::connect_timeout(&to, deadline).map_err(|e| format!("{addr}: {e}"))?;
    let left = || {
        deadline
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1))
    };
    conn.set_write_timeout(Some(left()))
        .and_then(|_| {
            write!(
                conn,
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
        })
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut body = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if start.elapsed() >= deadline {
            return Err(format!("{addr}: no whole answer within {deadline:?}"));
        }
        conn.set_read_timeout(Some(left()))
            .map_err(|e| format!("{addr}: {e}"))?;
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{addr}: {e}")),
        }
        if body.len() > max_bytes {
            return Err(format!("{addr}: an answer over {max_bytes} bytes"));
        }
    }
    let text = String::from_utf8(body).map_err(|_| format!("{addr}: an answer not in UTF-8"))?;
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| head.starts_with("HTTP/1."))
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    if status != 200 {
        return Err(format!("{addr}{path}: HTTP status {status}"));
    }
    Ok(rest.to_string())
}

/// Paths counted by name; anything else counts as "(other)" so a scan of
/// random paths cannot grow the counters.
pub fn known_path(p: &str) -> &'static str {
    match p {
        "/" => "/",
        "/metrics" => "/metrics",
        "/probe" => "/probe",
        "/healthz" => "/healthz",
        "/mesh" => "/mesh",
        "/mesh.json" => "/mesh.json",
        "/history" => "/history",
        _ => "(other)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:5555".parse().unwrap()
    }

    /// The head limit holds however the head arrives: 9,042 bytes sent at
    /// once are refused (431), 8,000 read.
    #[test]
    fn a_head_over_the_limit_is_refused_whole() {
        use std::io::Write as _;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        for (len, ok) in [(9_042usize, false), (8_000, true)] {
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let filler = "x".repeat(len - "GET / HTTP/1.1\r\nX: \r\n\r\n".len());
            let head = format!("GET / HTTP/1.1\r\nX: {filler}\r\n\r\n");
            assert_eq!(head.len(), len);
            c.write_all(head.as_bytes()).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let r = read_head(&mut s);
            match ok {
                true => assert!(r.is_ok(), "{len}: {r:?}"),
                false => assert_eq!(r.map_err(|e| e.0), Err(431), "{len}"),
            }
        }
    }

    #[test]
    fn heads_by_hand() {
        let r = parse_head(
            "GET /probe?target=sim%3Aseed%3D3&method=prcmt&x HTTP/1.1\r\nHost: a\r\nX-Prometheus-Scrape-Timeout-Seconds: 9.5",
            peer(),
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/probe");
        assert_eq!(
            r.query,
            vec![
                ("target".to_string(), "sim:seed=3".to_string()),
                ("method".to_string(), "prcmt".to_string()),
                ("x".to_string(), String::new())
            ]
        );
        assert_eq!(r.header("x-prometheus-scrape-timeout-seconds"), Some("9.5"));
        assert_eq!(parse_head("GET /\r\n", peer()).unwrap_err().0, 400);
        // Found by fuzzing: a target with no path.
        assert_eq!(parse_head("GET ?x HTTP/1.1", peer()).unwrap_err().0, 400);
        assert_eq!(
            parse_head("GET http://a/ HTTP/1.1", peer()).unwrap_err().0,
            400
        );
        assert_eq!(parse_head("GET / SPDY/3", peer()).unwrap_err().0, 400);
        assert_eq!(
            parse_head("GET /?a=%zz HTTP/1.1", peer()).unwrap_err().0,
            400
        );
        assert_eq!(
            parse_head("GET / HTTP/1.1\r\nnocolon", peer())
                .unwrap_err()
                .0,
            400
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c").as_deref(), Some("a b c"));
        assert_eq!(percent_decode("%e2%9c%93").as_deref(), Some("\u{2713}"));
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }
}
