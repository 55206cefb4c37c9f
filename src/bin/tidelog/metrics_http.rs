//! `tidelog serve --metrics-listen ADDR`: the broker's metrics in the Prometheus text
//! format at `GET /metrics`, over a tiny blocking HTTP/1.1 responder (one thread, one
//! connection at a time, `Connection: close`): a scrape every few seconds needs no more.
//!
//! Each scrape takes a fresh [`tidelog::Broker::metrics`] snapshot and renders it with
//! [`tidelog::metrics::prometheus_text`]. A request line or headers that do not arrive
//! within [`READ_TIMEOUT`] or exceed [`MAX_HEAD`] bytes get no answer; other paths get
//! 404 and other methods 405.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use tidelog::Broker;

/// Longest a client may take to send its request (and to read the answer).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes of request line and headers read.
const MAX_HEAD: usize = 8 * 1024;

/// Serves `listener` on a thread of its own for as long as the process runs.
pub(crate) fn spawn(listener: TcpListener, broker: Broker) -> std::io::Result<()> {
    let render = move || tidelog::metrics::prometheus_text(&broker.metrics());
    std::thread::Builder::new()
        .name("tidelog-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(s) => {
                        if let Err(e) = answer(s, &render) {
                            tracing::debug!(error = %e, "metrics request failed");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics listener: accept failed");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })
        .map(drop)
}

/// Reads one request from `s` and answers it.
fn answer(mut s: TcpStream, render: &dyn Fn() -> String) -> std::io::Result<()> {
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(READ_TIMEOUT))?;
    let Some(head) = read_head(&mut s)? else {
        return Ok(());
    };
    let (status, content_type, body) = match route(&head) {
        Route::Metrics { with_body } => {
            let text = render();
            (
                "200 OK",
                tidelog::metrics::CONTENT_TYPE,
                with_body.then_some(text),
            )
        }
        Route::NotFound => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            Some("tidelog serves its metrics at /metrics\n".to_string()),
        ),
        Route::BadMethod => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            Some("only GET (and HEAD) are answered\n".to_string()),
        ),
    };
    let body = body.unwrap_or_default();
    let allow = if status.starts_with("405") {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()
}

/// The request line and headers, up to the blank line; None if the client sent nothing
/// or closed early.
fn read_head(s: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() >= MAX_HEAD {
            return Ok(None);
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(String::from_utf8_lossy(&head).into_owned()))
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics { with_body: bool },
    NotFound,
    BadMethod,
}

/// Routes a request by its first line (`GET /metrics HTTP/1.1`); a query string is
/// ignored.
fn route(head: &str) -> Route {
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let method = words.next().unwrap_or("");
    let path = words.next().unwrap_or("");
    let path = path.split('?').next().unwrap_or("");
    let with_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => return Route::BadMethod,
    };
    if path == "/metrics" {
        Route::Metrics { with_body }
    } else {
        Route::NotFound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_routed_by_method_and_path() {
        assert_eq!(
            route("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics { with_body: true }
        );
        assert_eq!(
            route("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Route::Metrics { with_body: true }
        );
        assert_eq!(
            route("HEAD /metrics HTTP/1.1\r\n\r\n"),
            Route::Metrics { with_body: false }
        );
        assert_eq!(route("GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route("POST /metrics HTTP/1.1\r\n\r\n"), Route::BadMethod);
        assert_eq!(route(""), Route::BadMethod);
    }
}
