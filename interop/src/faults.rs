//! Network faults between the nodes of a test cluster, and the nodes themselves as
//! `tidelog serve` child processes that can be paused (SIGSTOP), killed (SIGKILL) and
//! restarted.
//!
//! Two ways to cut links, chosen by [`Net::new`]:
//! - **network namespaces** (root, `ip netns` available, as in CI): each node runs in its
//!   own namespace with one veth interface on a bridge of the root namespace, where the
//!   clients run (the bridge's own address); a fault is a blackhole route inside a
//!   namespace (`ip route add blackhole PEER/32`), so the node's packets to that peer
//!   vanish (no tc qdisc is needed). Names embed the process id and a counter, so tests
//!   running at once do not collide; namespaces, routes and the bridge are removed when
//!   the [`Net`] is dropped (a panicking test too), and leftovers of dead test processes
//!   are removed on the next start.
//! - **an in-process TCP proxy** (anyone else): every listener of a node (clients,
//!   replication, quorum) is reached through a proxy port; the proxy tells which node
//!   opened a connection (the owner of its source port in `/proc`) and holds the bytes
//!   a cut direction would carry, as a lost route does (the streams resume intact when
//!   healed).
//!
//! `TIDELOG_FAULTS_NET=proxy` forces the proxy.

use std::collections::HashSet;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::{free_ports, log_tails, terminate_child, terminate_children};

/// One side of a link: a node (by index) or the clients (the test's own process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Node index `i`.
    Node(usize),
    /// The clients: producers, consumers and the test's metadata requests.
    Clients,
}

/// Which mechanism cuts links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetKind {
    /// Network namespaces and blackhole routes.
    Namespaces,
    /// The in-process TCP proxy.
    Proxy,
}

/// Kafka listener port of a node in its own namespace.
const NS_KAFKA_PORT: u16 = 9092;
/// Quorum port of a node in its own namespace.
const NS_QUORUM_PORT: u16 = 9093;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The network of an `n`-node test cluster.
pub struct Net {
    kind: NetKind,
    n: usize,
    ns: Option<Namespaces>,
    proxy: Option<Proxy>,
}

impl Net {
    /// Namespaces when this process is root and `ip netns` works (and
    /// `TIDELOG_FAULTS_NET` is not `proxy`), else the proxy.
    pub fn new(n: usize) -> Net {
        let forced_proxy = std::env::var("TIDELOG_FAULTS_NET").is_ok_and(|v| v == "proxy");
        if !forced_proxy {
            match Namespaces::create(n) {
                Ok(ns) => {
                    return Net {
                        kind: NetKind::Namespaces,
                        n,
                        ns: Some(ns),
                        proxy: None,
                    };
                }
                Err(why) => {
                    eprintln!("network namespaces unavailable ({why}): using the TCP proxy")
                }
            }
        }
        Net::proxy(n)
    }

    /// The proxy, whoever runs the test.
    pub fn proxy(n: usize) -> Net {
        Net {
            kind: NetKind::Proxy,
            n,
            ns: None,
            proxy: Some(Proxy::start(n)),
        }
    }

    /// The mechanism in use.
    pub fn kind(&self) -> NetKind {
        self.kind
    }

    /// What the mechanism is, for the test's output.
    pub fn describe(&self) -> String {
        match (&self.ns, &self.proxy) {
            (Some(ns), _) => format!(
                "network namespaces {} on bridge {} ({}.0/24), faults are blackhole routes",
                ns.names.join(","),
                ns.bridge,
                ns.subnet
            ),
            _ => "an in-process TCP proxy in front of every listener".to_string(),
        }
    }

    /// The address clients reach node index `i` at.
    pub fn client_addr(&self, i: usize) -> String {
        match (&self.ns, &self.proxy) {
            (Some(ns), _) => format!("{}:{NS_KAFKA_PORT}", ns.node_ip(i)),
            (_, Some(p)) => format!("127.0.0.1:{}", p.front_client[i]),
            _ => unreachable!("a net has namespaces or a proxy"),
        }
    }

    /// Every node's client address, comma-separated.
    pub fn bootstrap(&self) -> String {
        (0..self.n)
            .map(|i| self.client_addr(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `tidelog serve` arguments that place node index `i` on this network
    /// (listeners, advertised addresses, quorum).
    pub fn node_args(&self, i: usize) -> Vec<String> {
        match (&self.ns, &self.proxy) {
            (Some(ns), _) => {
                let quorum = (0..self.n)
                    .map(|k| format!("{}@{}:{NS_QUORUM_PORT}", k + 1, ns.node_ip(k)))
                    .collect::<Vec<_>>()
                    .join(",");
                vec![
                    "--listen".into(),
                    self.client_addr(i),
                    "--quorum".into(),
                    quorum,
                ]
            }
            (_, Some(p)) => p.node_args(i),
            _ => unreachable!("a net has namespaces or a proxy"),
        }
    }

    /// The command that runs `bin` as node index `i` (inside its namespace, if any).
    pub fn command(&self, i: usize, bin: &Path) -> Command {
        match &self.ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.names[i]]).arg(bin);
                c
            }
            None => Command::new(bin),
        }
    }

    /// Gives node index `i` fresh real ports behind its proxy ports, after a node found
    /// one of its ports taken at start; false on namespaces (where each node has its
    /// own ports and nothing else listens).
    fn move_node(&self, i: usize) -> bool {
        match &self.proxy {
            Some(p) => {
                p.move_node(i);
                true
            }
            None => false,
        }
    }

    /// Tells the proxy node index `i`'s process id (it finds which node opened a
    /// connection by it); None when it is down.
    pub fn set_pid(&self, i: usize, pid: Option<u32>) {
        if let Some(p) = &self.proxy {
            p.pids.lock().unwrap()[i] = pid;
        }
    }

    /// From now on nothing `from` sends reaches `to` (one way; the other direction of
    /// a TCP connection between them stalls too, as its acknowledgements are lost).
    ///
    /// # Panics
    /// If the route cannot be added.
    pub fn cut(&self, from: End, to: End) {
        if from == to {
            return;
        }
        match (&self.ns, &self.proxy) {
            (Some(ns), _) => ns.cut(from, to),
            (_, Some(p)) => {
                p.blocked.lock().unwrap().insert((from, to));
            }
            _ => unreachable!("a net has namespaces or a proxy"),
        }
    }

    /// Cuts both directions between every member of `a` and every member of `b`.
    pub fn partition(&self, a: &[End], b: &[End]) {
        for x in a {
            for y in b {
                self.cut(*x, *y);
                self.cut(*y, *x);
            }
        }
    }

    /// Every link works again.
    pub fn heal(&self) {
        match (&self.ns, &self.proxy) {
            (Some(ns), _) => ns.heal(),
            (_, Some(p)) => p.blocked.lock().unwrap().clear(),
            _ => unreachable!("a net has namespaces or a proxy"),
        }
    }
}

/// Runs `ip ARGS`; its stderr on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_output(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The namespaces, their veth pairs and the bridge.
struct Namespaces {
    bridge: String,
    names: Vec<String>,
    /// `10.A.B`: the bridge is `.1`, node index `i` is `.(i + 2)`.
    subnet: String,
    /// Routes added: (namespace index, destination).
    routes: Mutex<Vec<(usize, String)>>,
}

/// The prefix of every name this module gives (namespaces, bridges, veths).
const PREFIX: &str = "tlf";

impl Namespaces {
    fn create(n: usize) -> Result<Namespaces, String> {
        if !running_as_root() {
            return Err("not root".into());
        }
        remove_leftovers();
        let pid = std::process::id();
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{}", pid % 100_000, k % 100);
        let subnet = free_subnet(pid, k)?;
        let mut ns = Namespaces {
            bridge: format!("{PREFIX}{tag}b"),
            names: Vec::new(),
            subnet,
            routes: Mutex::new(Vec::new()),
        };
        // Dropping `ns` on an error removes what was made.
        ip(&["link", "add", &ns.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", ns.subnet),
            "dev",
            &ns.bridge,
        ])?;
        ip(&["link", "set", &ns.bridge, "up"])?;
        for i in 0..n {
            let name = format!("{PREFIX}-{pid}-{k}-n{}", i + 1);
            ip(&["netns", "add", &name])?;
            ns.names.push(name.clone());
            let veth = format!("{PREFIX}{tag}v{i}");
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &name,
            ])?;
            ip(&["link", "set", &veth, "master", &ns.bridge])?;
            ip(&["link", "set", &veth, "up"])?;
            let addr = format!("{}/24", ns.node_ip(i));
            ip(&["-n", &name, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        // The bridge forwards once its ports are up; the root namespace must reach
        // every node before the nodes start (a ping-less check: a route lookup).
        for i in 0..n {
            let route = ip_output(&["route", "get", &ns.node_ip(i)]);
            if !route.contains(&ns.bridge) {
                return Err(format!(
                    "{} is not routed through {}",
                    ns.node_ip(i),
                    ns.bridge
                ));
            }
        }
        Ok(ns)
    }

    fn node_ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 2)
    }

    fn addr_of(&self, end: End) -> String {
        match end {
            End::Node(i) => self.node_ip(i),
            End::Clients => format!("{}.1", self.subnet),
        }
    }

    fn cut(&self, from: End, to: End) {
        let End::Node(i) = from else {
            // The clients' side lives in the root namespace, shared with the host: cut
            // the way back instead (the node's packets to the clients), which stalls
            // the clients' TCP connections the same.
            if let End::Node(j) = to {
                self.cut(End::Node(j), End::Clients);
            }
            return;
        };
        let dest = format!("{}/32", self.addr_of(to));
        let mut routes = self.routes.lock().unwrap();
        if routes.contains(&(i, dest.clone())) {
            return;
        }
        ip(&["-n", &self.names[i], "route", "add", "blackhole", &dest])
            .unwrap_or_else(|e| panic!("cut node {} from {dest}: {e}", i + 1));
        routes.push((i, dest));
    }

    fn heal(&self) {
        let mut routes = self.routes.lock().unwrap();
        for (i, dest) in routes.drain(..) {
            ip(&["-n", &self.names[i], "route", "del", "blackhole", &dest])
                .unwrap_or_else(|e| panic!("heal node {} to {dest}: {e}", i + 1));
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.names {
            // Removes its end of the veth pair, and with it the bridge's.
            let _ = ip(&["netns", "del", name]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A `10.A.B` /24 no interface of the host has, from the process id and counter.
fn free_subnet(pid: u32, k: usize) -> Result<String, String> {
    let used = ip_output(&["-4", "-o", "addr"]);
    for attempt in 0..200u32 {
        let x = (pid as usize + k * 7919 + attempt as usize * 104_729) % (200 * 250);
        let subnet = format!("10.{}.{}", 30 + x / 250, x % 250);
        if !used.contains(&format!(" {subnet}.")) {
            return Ok(subnet);
        }
    }
    Err("no free 10.x.y.0/24".into())
}

/// Removes the namespaces and bridges of test processes that died without cleaning up
/// (their names carry the process id).
fn remove_leftovers() {
    for line in ip_output(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
    for line in ip_output(&["-o", "link", "show", "type", "bridge"]).lines() {
        // "12: tlf123450b: <...> ..." with no port left is a leftover.
        let name = line
            .split(':')
            .nth(1)
            .map(str::trim)
            .unwrap_or("")
            .to_string();
        if name.starts_with(PREFIX)
            && ip_output(&["-o", "link", "show", "master", &name])
                .trim()
                .is_empty()
        {
            let _ = ip(&["link", "del", &name]);
        }
    }
}

/// The proxy: one front port per node listener; `blocked` holds the directions cut.
struct Proxy {
    n: usize,
    /// Real ports: clients, replication, quorum, per node (shared with the links that
    /// forward to them: [`Proxy::move_node`] changes them).
    client: Vec<Arc<AtomicU16>>,
    replication: Vec<Arc<AtomicU16>>,
    quorum: Vec<Arc<AtomicU16>>,
    /// Front ports, per node.
    front_client: Vec<u16>,
    front_replication: Vec<u16>,
    front_quorum: Vec<u16>,
    blocked: Arc<Mutex<HashSet<(End, End)>>>,
    pids: Arc<Mutex<Vec<Option<u32>>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(n: usize) -> Proxy {
        let ports = free_ports(3 * n);
        let stop = Arc::new(AtomicBool::new(false));
        let blocked = Arc::new(Mutex::new(HashSet::new()));
        let pids = Arc::new(Mutex::new(vec![None; n]));
        let ports: Vec<Arc<AtomicU16>> = ports
            .into_iter()
            .map(|p| Arc::new(AtomicU16::new(p)))
            .collect();
        let mut fronts = [Vec::new(), Vec::new(), Vec::new()];
        for (kind, backs) in [&ports[..n], &ports[n..2 * n], &ports[2 * n..]]
            .into_iter()
            .enumerate()
        {
            for (j, back) in backs.iter().enumerate() {
                let listener = TcpListener::bind("127.0.0.1:0").expect("a proxy port");
                fronts[kind].push(listener.local_addr().expect("bound").port());
                let link = Link {
                    to: j,
                    back: back.clone(),
                    blocked: blocked.clone(),
                    pids: pids.clone(),
                    stop: stop.clone(),
                };
                std::thread::spawn(move || link.accept_loop(listener));
            }
        }
        let [front_client, front_replication, front_quorum] = fronts;
        Proxy {
            n,
            client: ports[..n].to_vec(),
            replication: ports[n..2 * n].to_vec(),
            quorum: ports[2 * n..].to_vec(),
            front_client,
            front_replication,
            front_quorum,
            blocked,
            pids,
            stop,
        }
    }

    /// Fresh real ports for node `i` (its front ports stay).
    fn move_node(&self, i: usize) {
        let fresh = free_ports(3);
        for (port, new) in [&self.client[i], &self.replication[i], &self.quorum[i]]
            .into_iter()
            .zip(fresh)
        {
            port.store(new, Ordering::Release);
        }
    }

    /// Node `i` listens on its real ports and advertises the front ones; its quorum
    /// list names its own real quorum port and the others' front ports.
    fn node_args(&self, i: usize) -> Vec<String> {
        let quorum = (0..self.n)
            .map(|k| {
                let port = if k == i {
                    self.quorum[k].load(Ordering::Acquire)
                } else {
                    self.front_quorum[k]
                };
                format!("{}@127.0.0.1:{port}", k + 1)
            })
            .collect::<Vec<_>>()
            .join(",");
        vec![
            "--listen".into(),
            format!(
                "CLIENT://127.0.0.1:{}",
                self.client[i].load(Ordering::Acquire)
            ),
            "--listen".into(),
            format!(
                "REPLICATION://127.0.0.1:{}",
                self.replication[i].load(Ordering::Acquire)
            ),
            "--listener-security-protocol-map".into(),
            "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT".into(),
            "--inter-broker-listener".into(),
            "REPLICATION".into(),
            "--advertised".into(),
            format!(
                "CLIENT://127.0.0.1:{},REPLICATION://127.0.0.1:{}",
                self.front_client[i], self.front_replication[i]
            ),
            "--quorum".into(),
            quorum,
        ]
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// One front port of node `to`, forwarding to its real port `back`.
struct Link {
    to: usize,
    back: Arc<AtomicU16>,
    blocked: Arc<Mutex<HashSet<(End, End)>>>,
    pids: Arc<Mutex<Vec<Option<u32>>>>,
    stop: Arc<AtomicBool>,
}

impl Link {
    fn accept_loop(self, listener: TcpListener) {
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let front = listener.local_addr().expect("bound").port();
        while !self.stop.load(Ordering::Acquire) {
            let (stream, peer) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(_) => continue,
            };
            let from = self.source(peer, front);
            let Ok(back) = TcpStream::connect(("127.0.0.1", self.back.load(Ordering::Acquire)))
            else {
                continue;
            };
            let _ = stream.set_nonblocking(false);
            let to = End::Node(self.to);
            for (r, w, dir) in [
                (stream.try_clone(), back.try_clone(), (from, to)),
                (back.try_clone(), stream.try_clone(), (to, from)),
            ] {
                let (Ok(r), Ok(w)) = (r, w) else { continue };
                let blocked = self.blocked.clone();
                let stop = self.stop.clone();
                std::thread::spawn(move || pump(r, w, dir, &blocked, &stop));
            }
        }
    }

    /// Which node opened the connection from `peer` to the front port: the one whose
    /// process owns the socket with that source port; the clients otherwise.
    fn source(&self, peer: SocketAddr, front: u16) -> End {
        let Some(inode) = socket_inode(peer.port(), front) else {
            return End::Clients;
        };
        let pids = self.pids.lock().unwrap().clone();
        let wanted = format!("socket:[{inode}]");
        for (i, pid) in pids.iter().enumerate() {
            let Some(pid) = pid else { continue };
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == wanted) {
                    return End::Node(i);
                }
            }
        }
        End::Clients
    }
}

/// The inode of the loopback TCP socket from `local` to `remote` (ports), from
/// `/proc/net/tcp` (`sl local_address rem_address st ... inode`).
fn socket_inode(local: u16, remote: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let l = format!("0100007F:{local:04X}");
    let r = format!("0100007F:{remote:04X}");
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == l && f[2] == r)
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

/// Copies `r` to `w` while the direction `dir` is not blocked (held bytes wait, as
/// behind a lost route), until either side closes or the proxy stops.
fn pump(
    mut r: TcpStream,
    mut w: TcpStream,
    dir: (End, End),
    blocked: &Mutex<HashSet<(End, End)>>,
    stop: &AtomicBool,
) {
    let _ = r.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Acquire) {
        if blocked.lock().unwrap().contains(&dir) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                if w.write_all(&buf[..k]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = r.shutdown(Shutdown::Both);
    let _ = w.shutdown(Shutdown::Both);
}

/// The lines of `ss -tanp` for the port a "cannot listen on 127.0.0.1:PORT: ..." message
/// names (who took it), or why there are none.
fn port_holders(message: &str) -> String {
    let Some(port) = message
        .split("cannot listen on ")
        .nth(1)
        .and_then(|rest| rest.split(": ").next())
        .and_then(|addr| addr.rsplit(':').next())
    else {
        return "(no port in the message)".into();
    };
    match Command::new("ss").arg("-tanp").output() {
        Ok(out) => {
            let needle = format!(":{port} ");
            let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains(&needle))
                .map(str::to_string)
                .collect();
            if lines.is_empty() {
                format!("(none on {port} any more)")
            } else {
                lines.join("\n")
            }
        }
        Err(e) => format!("(ss: {e})"),
    }
}

/// The nodes of a fault test: `tidelog serve` child processes on a [`Net`], with data
/// directories `root/node-N` and logs `root/node-N.log`. Killed (and the net removed)
/// when dropped.
pub struct Nodes {
    bin: PathBuf,
    root: PathBuf,
    extra: Vec<String>,
    log_filter: String,
    children: Vec<Option<Child>>,
    /// The network.
    pub net: Net,
}

impl Nodes {
    /// Starts the nodes of `net` (as many as it was made for), each with `extra`
    /// arguments after the network ones, logging at `log_filter`, and waits until each
    /// listens or has exited (at most 30 s each). On the proxy, a node whose port was
    /// taken between [`free_ports`] and its start is started again on fresh ports.
    pub fn start(bin: PathBuf, root: &Path, net: Net, extra: &[&str], log_filter: &str) -> Nodes {
        let n = net.n;
        let mut nodes = Nodes {
            bin,
            root: root.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            log_filter: log_filter.to_string(),
            children: (0..n).map(|_| None).collect(),
            net,
        };
        // All at once, then each awaited: a node may wait for its peers at start.
        let offsets: Vec<u64> = (0..n).map(|i| nodes.spawn(i)).collect();
        for (i, offset) in offsets.into_iter().enumerate() {
            nodes.await_listening(i, offset);
        }
        nodes
    }

    /// The data directory of node index `i`.
    pub fn dir(&self, i: usize) -> PathBuf {
        self.root.join(format!("node-{}", i + 1))
    }

    /// Starts node index `i` (again) on its data directory and addresses, and waits
    /// until it listens (see [`Nodes::start`]'s note on taken ports).
    pub fn restart(&mut self, i: usize) {
        let offset = self.spawn(i);
        self.await_listening(i, offset);
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.root.join(format!("node-{}.log", i + 1))
    }

    /// What node index `i` wrote to its log from byte `offset` on (empty if unreadable).
    fn log_since(&self, i: usize, offset: u64) -> String {
        let mut bytes = Vec::new();
        let _ = File::open(self.log_path(i)).and_then(|mut f| {
            f.seek(SeekFrom::Start(offset))?;
            f.read_to_end(&mut bytes)
        });
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Spawns node index `i`; returns its log's length before, where this run's lines
    /// start.
    fn spawn(&mut self, i: usize) -> u64 {
        assert!(self.children[i].is_none(), "node {} is running", i + 1);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("the node's log file");
        let offset = log.metadata().map_or(0, |m| m.len());
        let child = self
            .net
            .command(i, &self.bin)
            .arg("serve")
            .arg("--data")
            .arg(self.dir(i))
            .arg("--node-id")
            .arg((i + 1).to_string())
            .args(self.net.node_args(i))
            .args(&self.extra)
            .env("RUST_LOG", &self.log_filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn tidelog serve");
        self.net.set_pid(i, Some(child.id()));
        self.children[i] = Some(child);
        offset
    }

    /// Waits, for at most 30 s, until node index `i`'s log since `offset` says it
    /// listens or the node has exited. A port handed out by [`free_ports`] is free when
    /// chosen, not when the node binds it: a node that exits because another socket took
    /// one of its ports meanwhile is started again on fresh ports behind the same proxy
    /// ports (up to three times), and what held the port is printed. On namespaces each
    /// node has its own fixed ports, so such a node is left to the test's checks.
    fn await_listening(&mut self, i: usize, mut offset: u64) {
        const MAX_MOVES: u32 = 3;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut moves = 0;
        while Instant::now() < deadline {
            let said = self.log_since(i, offset);
            if said.contains("tidelog serve: Kafka protocol on") {
                return;
            }
            let exited = match self.children[i].as_mut().map(Child::try_wait) {
                Some(Ok(None)) => false,
                Some(_) => true,
                None => return,
            };
            if exited {
                if !said.contains("Address already in use")
                    || moves == MAX_MOVES
                    || !self.net.move_node(i)
                {
                    return;
                }
                moves += 1;
                eprintln!(
                    "node {} could not listen: {}\nthe sockets on that port:\n{}\nstarting it on fresh ports ({moves} of {MAX_MOVES})",
                    i + 1,
                    said.trim(),
                    port_holders(&said)
                );
                self.children[i] = None;
                self.net.set_pid(i, None);
                offset = self.spawn(i);
                continue;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL node index `i` and reap it (a paused one too).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.net.set_pid(i, None);
    }

    /// Sends `SIG<name>` (`STOP`, `CONT`) to node index `i` if it runs.
    pub fn signal(&self, i: usize, name: &str) {
        if let Some(c) = &self.children[i] {
            let _ = Command::new("kill")
                .arg(format!("-{name}"))
                .arg(c.id().to_string())
                .status();
        }
    }

    /// SIGTERM node index `i` and wait up to 30 s for it; true if it exited cleanly.
    pub fn terminate(&mut self, i: usize) -> bool {
        self.net.set_pid(i, None);
        self.children[i].take().is_none_or(terminate_child)
    }

    /// SIGTERM every running node at once, as [`terminate_children`] does; per node
    /// index, true if it exited successfully or was not running.
    pub fn terminate_all(&mut self) -> Vec<bool> {
        for i in 0..self.children.len() {
            self.net.set_pid(i, None);
        }
        terminate_children(self.children.iter_mut().map(Option::take).collect())
    }

    /// The last `lines` lines of each node's log, for a failing test's message.
    pub fn logs(&self, lines: usize) -> String {
        log_tails(&self.root, self.children.len(), lines)
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            // A paused node dies of SIGKILL too.
            self.kill(i);
        }
        // A failing test (one that timed out waiting for the cluster, say) shows what
        // the nodes said: their logs go with the temporary directory.
        if std::thread::panicking() {
            eprintln!("the nodes' last log lines:\n{}", self.logs(40));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_whose_port_was_taken_starts_on_fresh_ports_behind_the_proxy() {
        let net = Net::proxy(1);
        let proxy = net.proxy.as_ref().expect("a proxy");
        let taken_port = proxy.client[0].load(Ordering::Acquire);
        // Another socket takes the node's port after it was chosen, before it starts.
        let _taken = TcpListener::bind(("127.0.0.1", taken_port)).expect("the port is free");
        let root = tempfile::tempdir().unwrap();
        let nodes = Nodes::start(crate::tidelog_bin(), root.path(), net, &[], "warn");
        let proxy = nodes.net.proxy.as_ref().expect("a proxy");
        let now = proxy.client[0].load(Ordering::Acquire);
        assert_ne!(now, taken_port, "the node was moved to a fresh port");
        crate::cluster::eventually(
            "the node lists itself behind its unchanged proxy port",
            Duration::from_secs(30),
            || {
                crate::cluster::describe(&nodes.net.client_addr(0), "none", Duration::from_secs(2))
                    .filter(|v| v.brokers == [1])
            },
        );
    }
}
