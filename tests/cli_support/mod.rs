//! Helpers shared by the `cli_*` tests: run the built `tidelog` binary.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The result of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `tidelog --data DATA ARGS...` with `stdin` as its input.
pub fn tidelog(data: &Path, args: &[&str], stdin: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidelog"));
    cmd.arg("--data").arg(data).args(args);
    run(cmd, stdin)
}

/// Runs `tidelog ARGS...` (no `--data`) with `stdin` as its input.
pub fn tidelog_raw(args: &[&str], stdin: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidelog"));
    cmd.args(args);
    run(cmd, stdin)
}

fn run(mut cmd: Command, stdin: &str) -> Run {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn tidelog");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for tidelog");
    let _ = writer.join();
    out.into()
}

/// Asserts a successful run and returns its stdout.
#[track_caller]
pub fn ok(run: Run) -> String {
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout
}

/// Asserts a failed run with `code`, a single `error: ` line on stderr containing
/// `needle`, and returns that line.
#[track_caller]
pub fn err(run: Run, code: i32, needle: &str) -> String {
    assert_eq!(run.code, code, "{run:?}");
    let line = run.stderr.trim_end();
    if code == 1 {
        assert_eq!(line.lines().count(), 1, "one line on stderr: {run:?}");
        assert!(line.starts_with("error: "), "{run:?}");
    }
    assert!(line.contains(needle), "stderr lacks {needle:?}: {run:?}");
    line.to_string()
}

/// The value of `"key":` in a flat JSON object (numbers, booleans and strings), as the
/// `perf` modes print it.
#[track_caller]
pub fn json_field(json: &str, key: &str) -> String {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {json}"));
    let rest = &json[at + key.len() + 3..];
    let end = rest.find([',', '}']).unwrap();
    rest[..end].trim_matches('"').to_string()
}

/// A numeric field of a flat JSON object.
#[track_caller]
pub fn json_number(json: &str, key: &str) -> f64 {
    json_field(json, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {json}"))
}

/// A `tidelog serve` child process listening on a free loopback port; killed when
/// dropped.
pub struct Serve {
    child: std::process::Child,
    /// `host:port` it listens on.
    pub addr: String,
}

/// Starts `tidelog --data DATA serve --listen 127.0.0.1:0 ARGS...` and waits (at most
/// 60 s) for the line naming its address. Its stderr is drained by a thread.
pub fn serve(data: &Path, args: &[&str]) -> Serve {
    serve_on(data, "127.0.0.1:0", args)
}

/// A `--quorum` of `n` voters (ids 1 to n) on loopback ports free when asked.
pub fn loopback_quorum(n: usize) -> String {
    free_ports(n)
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect::<Vec<_>>()
        .join(",")
}

/// `n` different loopback ports free when asked, below Linux's ephemeral range
/// (32768-60999). A port the kernel hands out for `bind(0)` or an outgoing connection
/// would not stay free: a node started earlier in the same test could listen or
/// connect from it before the node meant to bind it does ("Address already in use").
pub fn free_ports(n: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Tests of one binary run in parallel and test binaries one after another: each
    // process starts at its own place (its pid) and its threads take turns.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    let mut held = Vec::new();
    for _ in 0..SPAN {
        if held.len() == n {
            break;
        }
        let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port as u16)) {
            held.push(l);
        }
    }
    assert_eq!(held.len(), n, "{n} free loopback ports below 32768");
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// One loopback port free when asked, as [`free_ports`] picks them.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// Starts one `tidelog serve` node per id in `ids`, all at once, each with its data in
/// `root/node-ID` and `--node-id ID --quorum QUORUM`; the nodes (in `ids` order) and
/// their comma-separated addresses for `--bootstrap`.
pub fn serve_nodes(root: &Path, quorum: &str, ids: &[&str]) -> (Vec<Serve>, String) {
    serve_nodes_with(root, quorum, ids, &[])
}

/// [`serve_nodes`] with `more` arguments to every node, where `{id}` stands for the
/// node's id.
pub fn serve_nodes_with(
    root: &Path,
    quorum: &str,
    ids: &[&str],
    more: &[&str],
) -> (Vec<Serve>, String) {
    let nodes: Vec<Serve> = std::thread::scope(|s| {
        let started: Vec<_> = ids
            .iter()
            .map(|id| {
                s.spawn(move || {
                    let more: Vec<String> = more.iter().map(|a| a.replace("{id}", id)).collect();
                    let mut args = vec!["--node-id", id, "--quorum", quorum];
                    args.extend(more.iter().map(String::as_str));
                    serve(&root.join(format!("node-{id}")), &args)
                })
            })
            .collect();
        started.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let bootstrap = nodes
        .iter()
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    (nodes, bootstrap)
}

/// Runs `tidelog ARGS...` (no `--data`) every 200 ms until `done` holds for its run (at
/// most 60 s); that run.
#[track_caller]
pub fn run_until(args: &[&str], done: impl Fn(&Run) -> bool) -> Run {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let run = tidelog_raw(args, "");
        if done(&run) {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{args:?} never done: {run:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `args` followed by `--bootstrap BOOTSTRAP`.
pub fn with_bootstrap<'a>(args: &[&'a str], bootstrap: &'a str) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--bootstrap", bootstrap]);
    all
}

/// Runs `tidelog ARGS... --bootstrap BOOTSTRAP` every 300 ms until `done` accepts the run
/// (at most 60 s); that run. `what` says what was awaited when it never comes.
#[track_caller]
pub fn until(args: &[&str], bootstrap: &str, what: &str, done: impl Fn(&Run) -> bool) -> Run {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let all = with_bootstrap(args, bootstrap);
    loop {
        let run = tidelog_raw(&all, "");
        if done(&run) {
            return run;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {run:?}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// The JSON object on the first line that starts with `{` after `heading` in `stdout`.
#[cfg(feature = "cli")]
#[track_caller]
pub fn json_after(stdout: &str, heading: &str) -> serde_json::Value {
    let rest = stdout
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{heading} in {stdout}"));
    let line = rest
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line after {heading} in {stdout}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Writes `text` to the file `name` in `dir`; its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// [`serve`] listening on `listen` (e.g. the address of a node started before, to
/// restart it where its clients look for it).
pub fn serve_on(data: &Path, listen: &str, args: &[&str]) -> Serve {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .arg("--data")
        .arg(data)
        .args(["serve", "--listen", listen])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tidelog serve");
    let pipe = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let addr = line
                .split("Kafka protocol on ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next());
            let _ = tx.send((line.clone(), addr.map(str::to_string)));
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, Some(addr))) => return Serve { child, addr },
            Ok((line, None)) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("tidelog serve did not say where it listens: {seen:?}");
            }
        }
    }
}

impl Serve {
    /// SIGKILL, and waits for it to be gone.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (at most 60 s) for it to exit; its exit code.
    pub fn stop(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        self.exit_code_by(deadline)
    }

    /// Waits until `deadline` for it to exit; its exit code.
    fn exit_code_by(&mut self, deadline: std::time::Instant) -> Option<i32> {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Stops `nodes` as [`Serve::stop`] does, all at once: SIGTERM to every one first, so
/// that their controlled shutdowns run while the voters still form a majority (one after
/// another, the last voters' would wait out their timeout alone). Their exit codes.
pub fn stop_all(nodes: Vec<Serve>) -> Vec<Option<i32>> {
    let pids: Vec<String> = nodes.iter().map(|n| n.child.id().to_string()).collect();
    let _ = Command::new("kill").arg("-TERM").args(&pids).status();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    nodes
        .into_iter()
        .map(|mut n| n.exit_code_by(deadline))
        .collect()
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
