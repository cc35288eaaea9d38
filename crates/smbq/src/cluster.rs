//! `smbq serve --cluster URL[,URL...] --node NAME`, or `[cluster]` in smbq.toml: this server
//! is one node of several serving one namespace, with open state shared through etcd
//! (crate smbq_cluster, in builds with the `cluster` feature; docs/cluster.md).

use std::time::Duration;

use serde::Deserialize;

/// `[cluster]` (docs/configuration.md).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// etcd endpoints, `http://HOST:PORT`.
    pub etcd: Option<Vec<String>>,
    /// This node's name, unique in the cluster.
    pub node: Option<String>,
    /// The node lease's time to live in seconds (default 10): a dead node's opens are
    /// released this long after it stopped.
    pub ttl_secs: Option<u64>,
    /// Where in etcd's key space the cluster lives (default `/smbq/`): several clusters can
    /// share one etcd.
    pub prefix: Option<String>,
    /// Open and lock records this node may hold in etcd at once (default 100000).
    pub max_records: Option<usize>,
    /// Opens that may wait at once for other nodes' clients to acknowledge breaks (default
    /// 64).
    pub max_break_waits: Option<usize>,
}

/// How this server joins a cluster, from the flags over the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub endpoints: Vec<String>,
    pub node: String,
    pub ttl: Duration,
    pub prefix: String,
    pub max_records: usize,
    pub max_break_waits: usize,
}

const TTL_SECS: std::ops::RangeInclusive<u64> = 2..=300;

/// The plan, or `None` when no etcd is named. A node name is required with one, and both
/// are checked here, before anything starts.
pub fn plan(
    flag_etcd: Option<&str>,
    flag_node: Option<&str>,
    file: &ClusterFile,
) -> Result<Option<Plan>, String> {
    let endpoints: Vec<String> = match flag_etcd {
        Some(list) => list.split(',').map(|s| s.trim().to_owned()).collect(),
        None => file.etcd.clone().unwrap_or_default(),
    };
    let node = flag_node.map(str::to_owned).or(file.node.clone());
    if endpoints.is_empty() {
        return match node {
            Some(_) => Err("--node names a cluster node: give --cluster (etcd) too".into()),
            None => Ok(None),
        };
    }
    for e in &endpoints {
        let rest = e.strip_prefix("http://").unwrap_or_default();
        if rest.is_empty() || rest.contains('/') {
            return Err(format!(
                "cluster etcd endpoint {e:?}: expected http://HOST:PORT"
            ));
        }
    }
    let node = node.ok_or("--cluster needs --node NAME (or [cluster] node)")?;
    let name_ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if node.is_empty() || node.len() > 63 || !node.chars().all(name_ok) {
        return Err(format!(
            "cluster node name {node:?}: 1 to 63 letters, digits, '-' or '_'"
        ));
    }
    let ttl = file.ttl_secs.unwrap_or(10);
    if !TTL_SECS.contains(&ttl) {
        return Err(format!(
            "[cluster] ttl_secs = {ttl}: expected {} to {}",
            TTL_SECS.start(),
            TTL_SECS.end()
        ));
    }
    let prefix = file.prefix.clone().unwrap_or_else(|| "/smbq/".into());
    if !prefix.starts_with('/') {
        return Err(format!("[cluster] prefix {prefix:?}: must start with '/'"));
    }
    let max_records = file.max_records.unwrap_or(100_000);
    if max_records == 0 {
        return Err("[cluster] max_records = 0: a node needs at least one record".into());
    }
    let max_break_waits = file.max_break_waits.unwrap_or(64);
    if max_break_waits == 0 {
        return Err("[cluster] max_break_waits = 0: an open must be able to wait".into());
    }
    Ok(Some(Plan {
        endpoints,
        node,
        ttl: Duration::from_secs(ttl),
        prefix,
        max_records,
        max_break_waits,
    }))
}

/// A node's tag (smbq-server's `ServerConfig::node_tag`: its session ids and its range of
/// open ids): from its name, which is unique in the cluster, and never 0 (one server's).
pub fn node_tag(node: &str) -> u32 {
    let h = smbq_server::fnv::fnv1a(node.as_bytes());
    u32::try_from(h >> 32).unwrap_or(u32::MAX).max(1)
}

/// A joined node (builds with the `cluster` feature).
#[cfg(feature = "cluster")]
pub struct Node(std::sync::Arc<smbq_cluster::Cluster>);

/// Without the `cluster` feature no node exists.
#[cfg(not(feature = "cluster"))]
pub enum Node {}

#[cfg(feature = "cluster")]
impl Node {
    /// Joins the cluster `plan` names, serving `shares`.
    pub async fn join(
        plan: &Plan,
        shares: &[smbq_server::config::ShareConfig],
    ) -> Result<Node, String> {
        let cfg = smbq_cluster::ClusterConfig {
            ttl: plan.ttl,
            prefix: plan.prefix.clone(),
            volumes: volumes(shares),
            shares: shares
                .iter()
                .map(|s| (s.name.clone(), s.path.clone()))
                .collect(),
            max_records: plan.max_records,
            max_break_waits: plan.max_break_waits,
            open_ids: smbq_server::config::open_id_base(node_tag(&plan.node)),
            ..smbq_cluster::ClusterConfig::new(plan.endpoints.clone(), plan.node.clone())
        };
        let c = smbq_cluster::Cluster::join(cfg).await?;
        eprintln!(
            "smbq: cluster node {} (etcd {})",
            c.node(),
            plan.endpoints.join(",")
        );
        Ok(Node(c))
    }

    /// The open state of this node: its own table, wrapped.
    pub fn open_state(&self) -> Box<dyn smbq_server::open_state::OpenState> {
        self.0.wrap(smbq_server::Server::local_open_state())
    }

    /// Breaks this node sends for other nodes' opens go through `server`.
    pub fn deliver_to(&self, server: &std::sync::Arc<smbq_server::Server>) {
        let server = std::sync::Arc::downgrade(server);
        self.0.deliver_to(Box::new(move |fx| {
            if let Some(s) = server.upgrade() {
                s.apply_effects(fx);
            }
        }));
    }

    /// Keeps `server`'s persistent handles in etcd, and holds again the persistent opens of
    /// nodes that are gone (this node's earlier process among them) before anyone connects;
    /// those of nodes that leave later are taken over as they go. Durable opens parked here
    /// are handed to the node their client reconnects to, and the other way round.
    pub async fn hold_opens(
        &self,
        server: &std::sync::Arc<smbq_server::Server>,
    ) -> Result<(), String> {
        server
            .use_record_store(self.0.records())
            .map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Handle::current();
        // Holding an open again and giving one up ask etcd: off the etcd client's runtime.
        let (weak, on) = (std::sync::Arc::downgrade(server), rt.clone());
        let adopt = Box::new(move |records| {
            if let Some(s) = weak.upgrade() {
                on.spawn_blocking(move || s.adopt_persistent(records));
            }
        });
        let weak = std::sync::Arc::downgrade(server);
        let hand_over = Box::new(move |id, user: String, guid| {
            let s = weak.upgrade();
            let task = rt.spawn_blocking(move || s?.hand_over_parked(id, &user, guid));
            Box::pin(async move { task.await.ok().flatten() }) as smbq_cluster::BoxFuture<_>
        });
        let holder = smbq_cluster::Holder { adopt, hand_over };
        let taken = self.0.adopt(holder).await?;
        if !taken.is_empty() {
            let report = server.adopt_persistent(taken);
            eprintln!(
                "smbq: {} persistent opens of departed nodes held again ({} dropped)",
                report.restored,
                report.dropped.len()
            );
        }
        Ok(())
    }

    /// Resolves when the node's etcd lease is lost (the server must stop).
    pub async fn lost(&self) {
        self.0.lost().await
    }

    /// Releases the node's opens in etcd at shutdown.
    pub async fn leave(&self) {
        self.0.leave().await
    }
}

/// The volumes of `shares` for the cluster: each share root's device, named by the share.
/// Every node serves the same shares, so every node names a file system alike, whatever
/// device number its mount has there (smbq_cluster::keys::Volumes).
#[cfg(feature = "cluster")]
fn volumes(shares: &[smbq_server::config::ShareConfig]) -> Vec<(u64, String)> {
    use std::os::unix::fs::MetadataExt;
    shares
        .iter()
        .filter_map(|s| {
            let m = std::fs::metadata(&s.path).ok()?;
            Some((m.dev(), s.name.clone()))
        })
        .collect()
}

#[cfg(not(feature = "cluster"))]
impl Node {
    pub async fn join(_: &Plan, _: &[smbq_server::config::ShareConfig]) -> Result<Node, String> {
        Err("this smbq was built without the `cluster` feature \
             (cargo build --release -p smbq --features cluster)"
            .into())
    }

    pub fn open_state(&self) -> Box<dyn smbq_server::open_state::OpenState> {
        match *self {}
    }

    pub fn deliver_to(&self, _: &std::sync::Arc<smbq_server::Server>) {
        match *self {}
    }

    pub async fn hold_opens(&self, _: &std::sync::Arc<smbq_server::Server>) -> Result<(), String> {
        match *self {}
    }

    pub async fn lost(&self) {
        match *self {}
    }

    pub async fn leave(&self) {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes' session ids differ in their high 32 bits, and none is one server's; their
    /// ranges of open ids differ too (for the names the tests and the docs use; the bench's
    /// nodes run one set at a time).
    #[test]
    fn each_node_has_its_own_session_and_open_ids() {
        let names = ["n0", "n1", "n2", "n11", "n12", "n13"];
        let tags: std::collections::HashSet<u32> = names.map(node_tag).into();
        assert_eq!(tags.len(), names.len());
        assert!(!tags.contains(&0));
        let ranges: std::collections::HashSet<u32> = tags
            .iter()
            .map(|t| smbq_server::config::open_id_base(*t))
            .collect();
        assert_eq!(ranges.len(), names.len());
        assert_eq!(node_tag("n0"), node_tag("n0"));
    }

    #[test]
    fn flags_override_the_file_and_both_are_checked() {
        let file = ClusterFile {
            etcd: Some(vec!["http://10.0.0.1:2379".into()]),
            node: Some("a".into()),
            ttl_secs: Some(5),
            prefix: None,
            max_records: None,
            max_break_waits: None,
        };
        let p = plan(
            Some("http://127.0.0.1:2379,http://127.0.0.1:2381"),
            None,
            &file,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.endpoints.len(), 2);
        assert_eq!((p.node.as_str(), p.ttl), ("a", Duration::from_secs(5)));
        assert_eq!(plan(None, None, &ClusterFile::default()), Ok(None));
        for (etcd, node) in [
            (Some("http://h:1"), None),
            (Some("h:2379"), Some("a")),
            (Some("http://h:1/x"), Some("a")),
            (Some("http://h:1"), Some("a b")),
            (Some("http://h:1"), Some("")),
            (None, Some("a")),
        ] {
            assert!(
                plan(etcd, node, &ClusterFile::default()).is_err(),
                "{etcd:?} {node:?}"
            );
        }
        let bad_ttl = ClusterFile {
            ttl_secs: Some(1),
            ..ClusterFile::default()
        };
        assert!(plan(Some("http://h:1"), Some("a"), &bad_ttl).is_err());
    }
}
