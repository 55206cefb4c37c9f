//! The fault harness itself (`tidelog_interop::faults`): with three `tidelog serve`
//! nodes, a node cut from the clients stops answering them while its peers still list
//! it, and answers again once healed; a node cut from its peers (both ways) is fenced by
//! the others after the broker session timeout while the clients still reach it, and is
//! listed again once healed. Run on network namespaces when the test runs as root (and
//! `ip netns` works) and always on the in-process TCP proxy.

use std::time::Duration;

use tidelog_interop::cluster::{ClusterView, describe, eventually};
use tidelog_interop::faults::{End, Net, NetKind, Nodes};

const WAIT: Duration = Duration::from_secs(60);

fn ask(nodes: &Nodes, i: usize) -> Option<ClusterView> {
    describe(&nodes.net.client_addr(i), "none", Duration::from_secs(2))
}

fn cuts_and_heals(net: Net) {
    println!("faults through {}", net.describe());
    let root = tempfile::tempdir().unwrap();
    let nodes = Nodes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        net,
        &["--broker-session-timeout-ms", "2000"],
        "info",
    );
    let three = |v: ClusterView| (v.brokers == [1, 2, 3]).then_some(v);
    for i in 0..3 {
        eventually(&format!("node {} lists three brokers", i + 1), WAIT, || {
            ask(&nodes, i).and_then(three)
        });
    }

    nodes.net.partition(&[End::Node(0)], &[End::Clients]);
    eventually("node 1 stops answering the clients", WAIT, || {
        ask(&nodes, 0).is_none().then_some(())
    });
    eventually("node 2 still lists node 1", WAIT, || {
        ask(&nodes, 1).and_then(three)
    });
    nodes.net.heal();
    eventually("node 1 answers the clients again", WAIT, || ask(&nodes, 0));

    nodes
        .net
        .partition(&[End::Node(0)], &[End::Node(1), End::Node(2)]);
    eventually("node 2 fences node 1", WAIT, || {
        ask(&nodes, 1).filter(|v| v.brokers == [2, 3])
    });
    assert!(ask(&nodes, 0).is_some(), "the clients still reach node 1");
    nodes.net.heal();
    for i in 0..3 {
        eventually(
            &format!("node {} lists three brokers again", i + 1),
            WAIT,
            || ask(&nodes, i).and_then(three),
        );
    }
}

#[test]
fn namespaces_cut_and_heal_links() {
    let net = Net::new(3);
    if net.kind() != NetKind::Namespaces {
        println!("not root or no `ip netns`: the proxy test covers this run");
        return;
    }
    cuts_and_heals(net);
}

#[test]
fn the_proxy_cuts_and_heals_links() {
    cuts_and_heals(Net::proxy(3));
}
