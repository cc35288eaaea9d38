//! The door's table-driven tests (smbq-server's `file_state::door_tests`) on a cluster node:
//! the open state a node serves, its own table wrapped by `Cluster::wrap`, with every verb
//! that crosses nodes decided in a real etcd (Debian's `etcd`, started here on loopback ports
//! of its own). One node and nobody else, so every table must answer as it does on one
//! server: the wrapper, with its etcd records, holds, versions and watch, is one more
//! implementation of `OpenState` behind the same door.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use smbq_cluster::{Cluster, ClusterConfig};
use smbq_server::Server;
use smbq_server::file_state::door_tests;
use smbq_server::open_state::OpenState;

/// One etcd member on two free loopback ports, its data in a temporary directory; killed
/// when dropped.
struct Etcd {
    child: Child,
    client: String,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Etcd {
    fn start() -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let client = format!("http://127.0.0.1:{client}");
        let peer = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "door", "--data-dir"])
            .arg(dir.path())
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("door={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd (Debian's etcd-server; scripts/test.sh installs it)");
        let etcd = Etcd {
            child,
            client,
            _dir: dir,
        };
        let addr = etcd.client.trim_start_matches("http://").to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "etcd did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_door_tables_answer_alike_on_a_cluster_node() {
    let etcd = Etcd::start();
    let rt = Arc::new(tokio::runtime::Runtime::new().unwrap());
    let endpoint = etcd.client.clone();
    let revision = || {
        rt.block_on(async {
            let mut c = etcd_client::Client::connect([etcd.client.as_str()], None)
                .await
                .unwrap();
            c.get("/", None).await.unwrap().header().unwrap().revision()
        })
    };
    let before = revision();
    let made = Arc::new(AtomicUsize::new(0));
    let count = made.clone();
    let node_rt = rt.clone();
    // A fresh node per test, under a key prefix of its own, so no test meets another's
    // records in etcd.
    let make = move || -> Arc<dyn OpenState> {
        let n = made.fetch_add(1, Ordering::Relaxed);
        let cfg = ClusterConfig {
            endpoints: vec![endpoint.clone()],
            node: "door".into(),
            ttl: Duration::from_secs(10),
            prefix: format!("/door-{n}/"),
            timeout: Duration::from_secs(5),
            volumes: Vec::new(),
            shares: Vec::new(),
            max_records: 1000,
            max_break_waits: 8,
            open_ids: 1,
        };
        let cluster = node_rt.block_on(Cluster::join(cfg)).expect("join");
        Arc::from(cluster.wrap(Server::local_open_state()))
    };
    door_tests::run_all("cluster node", Rc::new(make));
    // Every test ran on nodes of its own (a fresh one per table), and the nodes wrote to etcd as they went (open
    // records, versions, locks, deletes), not only to their local tables.
    let nodes = count.load(Ordering::Relaxed);
    assert!(nodes >= door_tests::COUNT, "{nodes} nodes");
    let writes = revision() - before;
    assert!(writes > 50, "{writes} etcd revisions");
}
