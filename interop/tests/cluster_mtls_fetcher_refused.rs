//! A replica fetcher whose client certificate the leader does not trust is refused: three
//! `tidelog serve` child processes, each with a PLAINTEXT listener for clients and an
//! SSL listener named INTERNAL (`--listener-security-protocol-map INTERNAL:SSL`,
//! `--inter-broker-listener INTERNAL`) that requires client certificates signed by the
//! test CA (`--tls-client-ca`). Nodes 1 and 2 fetch with their own certificate
//! (`--tls-cert`); node 3 presents one of another CA, with the same subject
//! (`--inter-broker-ssl-certificate-location`). With records in a three-partition topic
//! replicated three times, node 3 leaves the ISR of every partition node 1 or 2 leads
//! (it never catches up) while nodes 1 and 2 stay in every ISR, node 3's own partition
//! included (its server certificate and their client certificates are good); the
//! leaders log the refused TLS handshakes and node 3 logs that its fetcher cannot
//! connect.

mod security_support;

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use security_support::Pki;
use tidelog_interop::cluster::{Processes, cli_ok, describe, eventually, free_ports};

const WAIT: Duration = Duration::from_secs(40);

#[test]
fn a_fetcher_with_an_untrusted_certificate_does_not_catch_up() {
    let pki = Pki::new();
    let root = tempfile::tempdir().unwrap();
    let internal = free_ports(3);
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (node_cert, node_key, ca) = (path(&pki.node_cert), path(&pki.node_key), path(&pki.ca));
    let (rogue_cert, rogue_key) = (path(&pki.rogue_cert), path(&pki.rogue_key));
    let common: Vec<&str> = vec![
        "--listener-security-protocol-map",
        "INTERNAL:SSL",
        "--inter-broker-listener",
        "INTERNAL",
        "--tls-cert",
        &node_cert,
        "--tls-key",
        &node_key,
        "--tls-client-ca",
        &ca,
        "--inter-broker-ssl-ca-location",
        &ca,
        "--broker-session-timeout-ms",
        "2000",
        "--replica-lag-time-max-ms",
        "2000",
    ];
    let nodes = Processes::start_each(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &common,
        "info",
        |i| {
            let mut args = vec![
                "--listen".to_string(),
                format!("INTERNAL://127.0.0.1:{}", internal[i]),
            ];
            if i == 2 {
                args.extend([
                    "--inter-broker-ssl-certificate-location".to_string(),
                    rogue_cert.clone(),
                    "--inter-broker-ssl-key-location".to_string(),
                    rogue_key.clone(),
                ]);
            }
            args
        },
    );
    let n1 = nodes.layout.addr(0);
    eventually("the cluster creates the topic", WAIT, || {
        cli_ok(
            &n1,
            &[
                "topics",
                "create",
                "events",
                "--partitions",
                "3",
                "--replication-factor",
                "3",
            ],
        )
    });
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", nodes.layout.bootstrap())
        .set("acks", "1")
        .set("message.timeout.ms", "20000")
        .create()
        .expect("an rdkafka producer");
    for p in 0..3 {
        for n in 0..10 {
            let value = format!("{p}:{n}");
            producer
                .send(
                    BaseRecord::<(), str>::to("events")
                        .partition(p)
                        .payload(&value),
                )
                .expect("queued");
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("acks=1 records acknowledged: {e}\n{}", nodes.logs()));

    let view = eventually("node 3 leaves the ISRs of nodes 1 and 2", WAIT, || {
        let v = describe(&n1, "events", Duration::from_secs(5))?;
        let settled = v.partitions.len() == 3
            && v.partitions.iter().all(|p| {
                if p.leader == 3 {
                    p.isr == [1, 2, 3]
                } else {
                    (p.leader == 1 || p.leader == 2) && p.isr == [1, 2]
                }
            });
        settled.then_some(v)
    });
    assert!(
        view.partitions.iter().any(|p| p.leader != 3),
        "no partition led by node 1 or 2: {view:?}"
    );
    assert!(
        nodes.count_in_logs("TLS handshake failed") > 0,
        "the leaders log the refused handshakes\n{}",
        nodes.logs()
    );
    assert!(
        nodes.count_in_logs("replica fetcher's TLS connection to the leader failed") > 0,
        "node 3 logs that its fetcher cannot connect\n{}",
        nodes.logs()
    );
}
