//! The mock server's HTTP: reading one request, writing one answer (a JSON
//! body, a chunked SSE stream that may be cut, or nothing at all).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::RecordedRequest;

/// What goes on the wire, decided under the lock.
pub(super) enum Answer {
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        content_type: String,
        body: String,
    },
    Events {
        events: Vec<String>,
        cut: bool,
    },
    Drop,
}

pub(super) async fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let received_ms = chrono::Utc::now().timestamp_millis();
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        received_ms,
    })
}

pub(super) async fn write_response(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Drop => stream.shutdown().await,
        Answer::Http {
            status,
            headers,
            content_type,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reason_phrase(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.shutdown().await
        }
        Answer::Events { events, cut } => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                )
                .await?;
            let keep = if cut {
                2.min(events.len())
            } else {
                events.len()
            };
            for event in &events[..keep] {
                let data = format!("data: {event}\n\n");
                stream
                    .write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
                    .await?;
                stream.flush().await?;
            }
            if !cut {
                stream.write_all(b"0\r\n\r\n").await?;
            }
            stream.shutdown().await
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
