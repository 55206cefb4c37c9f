//! A client that sends 1,000 malformed requests gets a bounded number of log lines: one
//! per 10 s for its address, and the count of the ones suppressed.

mod serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serve_support::{answers, start};

const FRAMES: usize = 1000;

/// The `i`-th bad frame: a negative size, an API that does not exist, an unsupported
/// version, or a body that does not decode.
fn bad_frame(i: usize) -> Vec<u8> {
    let mut msg = Vec::new();
    match i % 4 {
        0 => return (-1i32).to_be_bytes().to_vec(),
        1 => msg.extend_from_slice(&[0x03, 0xe7, 0, 0]), // api key 999, v0
        2 => msg.extend_from_slice(&[0, 3, 0x7f, 0]),    // Metadata v32512
        _ => msg.extend_from_slice(&[0, 3, 0, 1]),       // Metadata v1 ...
    }
    msg.extend_from_slice(&(i as i32).to_be_bytes());
    msg.extend_from_slice(&(-1i16).to_be_bytes());
    msg.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff, 0, 1]); // ... claiming 2^31 topics
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

#[test]
fn a_fuzzing_client_gets_a_bounded_number_of_log_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = start(tmp.path(), &[], None);
    for i in 0..FRAMES {
        let mut s = TcpStream::connect(serve.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&bad_frame(i)).unwrap();
        // The server closes the connection: it has handled (and maybe logged) the frame.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    assert!(answers(serve.addr), "the server still serves");
    let (status, lines) = serve.stop();
    assert!(status.success(), "{lines:?}");

    let warnings: Vec<&String> = lines.iter().filter(|l| l.contains("WARN")).collect();
    // One line per 10 s window while the frames were sent, and one at shutdown with the
    // count of those suppressed since the last line.
    assert!(
        warnings.len() >= 2 && warnings.len() <= 2 + 6,
        "{} warning lines for {FRAMES} bad frames:\n{}",
        warnings.len(),
        warnings
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Every bad frame is accounted for: logged, or counted in a later line.
    let suppressed: u64 = warnings
        .iter()
        .filter_map(|l| l.split("suppressed=").nth(1))
        .filter_map(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum();
    let logged = warnings
        .iter()
        .filter(|l| l.contains("closing the connection"))
        .count() as u64;
    assert_eq!(logged + suppressed, FRAMES as u64, "{warnings:#?}");
}
