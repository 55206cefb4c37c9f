//! Helpers of the `serve_*` tests: run `tidelog serve` as a child process, find the
//! address it listens on, collect its stderr, stop it with SIGTERM.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `tidelog serve`.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    /// Every stderr line so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

/// `tidelog --data DATA serve --listen 127.0.0.1:0 ARGS...`, started through `sh -c
/// "PRELUDE; exec tidelog ..."` when `prelude` is given (e.g. `ulimit -n 100`). Waits
/// for the line that names the address it listens on.
pub fn start(data: &Path, args: &[&str], prelude: Option<&str>) -> Serve {
    let bin = tidelog_interop::tidelog_bin();
    let mut cmd = match prelude {
        Some(p) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("{p} && exec \"$0\" \"$@\""))
                .arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    cmd.arg("--data")
        .arg(data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn tidelog serve");
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let pipe = child.stderr.take().expect("stderr");
    let lines = stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line
                .split("Kafka protocol on ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|a| a.parse::<SocketAddr>().ok())
            {
                let _ = tx.send(addr);
            }
            lines.lock().unwrap().push(line);
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addr) => addr,
        Err(_) => {
            let _ = child.kill();
            panic!(
                "tidelog serve did not say where it listens: {:?}",
                stderr.lock().unwrap()
            );
        }
    };
    Serve {
        child,
        addr,
        stderr,
    }
}

impl Serve {
    /// SIGTERM, then wait (up to 60 s) for the exit; the exit status and all of stderr.
    pub fn stop(mut self) -> (ExitStatus, Vec<String>) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = wait(&mut self.child, Duration::from_secs(60));
        // The reader thread sees the pipe close right after the exit.
        let end = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let lines = self.stderr.lock().unwrap().clone();
        (status, lines)
    }

    /// The stderr lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The stderr lines once one starts with `prefix` (waiting up to 10 s for it: the
    /// reader thread may not have read it yet).
    pub fn lines_through(&self, prefix: &str) -> Vec<String> {
        self.lines_until(|l| l.starts_with(prefix))
    }

    /// The stderr lines once one contains `needle` (waiting up to 10 s for it).
    pub fn lines_containing(&self, needle: &str) -> Vec<String> {
        self.lines_until(|l| l.contains(needle))
    }

    fn lines_until(&self, found: impl Fn(&str) -> bool) -> Vec<String> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.lines();
            if lines.iter().any(|l| found(l)) || Instant::now() >= end {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `tidelog --data DATA serve ARGS` to its exit (at most 60 s); its exit code and
/// stderr.
pub fn run_to_exit(data: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(tidelog_interop::tidelog_bin())
        .arg("--data")
        .arg(data)
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tidelog serve");
    let status = wait(&mut child, Duration::from_secs(60));
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr).expect("read stderr");
    }
    (status.code(), stderr)
}

/// Waits for `child` to exit, killing it after `limit`.
pub fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for tidelog") {
            return status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            panic!("tidelog did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An ApiVersions v0 request, size-prefixed.
pub fn api_versions(corr: i32) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&18i16.to_be_bytes());
    msg.extend_from_slice(&0i16.to_be_bytes());
    msg.extend_from_slice(&corr.to_be_bytes());
    msg.extend_from_slice(&(-1i16).to_be_bytes());
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// True if `s` gets an answer to an ApiVersions request within 10 s.
pub fn answered(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(&api_versions(5)).is_err() {
        return false;
    }
    let mut size = [0u8; 4];
    if s.read_exact(&mut size).is_err() {
        return false;
    }
    let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    s.read_exact(&mut body).is_ok() && body.get(..4) == Some(&5i32.to_be_bytes()[..])
}

/// True if a new connection to `addr` gets an answer.
pub fn answers(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).is_ok_and(|mut s| answered(&mut s))
}

/// True if a new connection to `addr` gets an answer within 10 s of retries.
pub fn eventually_answers(addr: SocketAddr) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if answers(addr) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
