//! 200 clients each send a Fetch that may wait `i32::MAX` ms, then hang up: the server
//! notices, and its threads, descriptors and connection slots come back.
#![cfg(feature = "server")]

mod server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use server_support::{answers, descriptors, eventually, fetch, frame, threads};
use tidelog::{Broker, Server, TopicConfig};

const CLIENTS: usize = 200;

#[test]
fn abandoned_long_polls_free_their_thread_descriptor_and_slot() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("quiet", 1, TopicConfig::new()).unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        // Room for the 200 abandoned fetches and nothing more: a leaked slot would
        // refuse the client that comes after.
        .max_connections(CLIENTS)
        // Well past the test: only the hang-up can end these fetches.
        .fetch_max_wait(Duration::from_secs(3600))
        .start()
        .unwrap();
    let addr = server.local_addr();
    // One connection served and gone, so that whatever the server starts lazily is
    // running before the idle values are taken.
    let before = threads();
    assert!(answers(addr));
    // Its thread ends soon after; if the server started one for good, the idle value
    // includes it.
    let _ = eventually(Duration::from_secs(5), || threads() <= before);
    let (idle_threads, idle_fds) = (threads(), descriptors());

    let request = frame(ApiKey::Fetch, 11, 1, &fetch("quiet", i32::MAX));
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&request).unwrap();
            s
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(20), || threads()
            >= idle_threads + CLIENTS),
        "the server should be holding {CLIENTS} long polls: {} threads, {idle_threads} when idle",
        threads()
    );
    drop(clients);

    assert!(
        eventually(Duration::from_secs(10), || threads() <= idle_threads
            && descriptors() <= idle_fds),
        "after the clients hung up: {} threads and {} descriptors, {idle_threads} and \
         {idle_fds} when idle",
        threads(),
        descriptors()
    );
    assert!(answers(addr), "a new client is served");
    server.shutdown().unwrap();
}
