//! Where the cluster's open state lives in etcd, and what its values hold. Pure: no I/O.
//!
//! Under the configured prefix (`/smbq/` by default):
//!
//! | key | value | etcd lease |
//! |---|---|---|
//! | `nodes/NODE` | [`NodeRecord`] | the node's |
//! | `shares/NAME` | the mark on share NAME's root (crate::marks), or `-` where it takes none | none |
//! | `f/FILE/v` | a counter, bumped by every admission, lock and delete-pending change | none |
//! | `f/FILE/dp` | the node that made the file delete-pending | none |
//! | `f/FILE/o/NODE/OPEN` | [`OpenRecord`] | the node's |
//! | `f/FILE/l/NODE/OPEN/OFFSET.LENGTH.KIND/SEQ` | empty | the node's |
//! | `f/FILE/b/HOLDER/REQUESTER.SEQ` | [`BreakRequest`] | the requester's |
//! | `f/FILE/k/NODE` | the revision of the file's changes NODE has seen (crate::remote) | NODE's |
//! | `f/FILE/fl/NODE` | the revision of another node's admission up to which NODE flushed the file | NODE's |
//! | `f/FILE/p/OPEN` | [`Hold`]: a persistent open's share mode and locks, kept while its node is away | none |
//! | `f/FILE/h/OPEN` | [`crate::ca::Ask`]: a node asks whichever node has durable or persistent open OPEN parked to hand it over | the asker's |
//! | `want/ID` | the same request, standing while the asker waits (outside the file's keys, which its last close drops) | the asker's |
//! | `ca/ID` | [`CaRecord`]: a persistent open's record (MS-SMB2 3.3.5.9.10), ID its FileId.Persistent | none |
//!
//! FILE is `VOLUME.INO.STREAM`, INO and STREAM in hex. VOLUME names the file system the
//! same way on every node ([`Volumes`]): `v` and a hash of its name, or `d` and the device
//! number for a device no volume is named for. Opens and locks hang on their node's lease, so etcd
//! itself drops them when a node dies. A decision reads `f/FILE/` in one range read and
//! writes in a transaction that compares `f/FILE/v`'s mod revision with the one it read: two
//! nodes deciding about one file at once cannot both win. A break request asks node HOLDER
//! to break what its opens cache for an open like the one described; HOLDER deletes the key
//! once its clients acknowledged (or the break timed out).

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use smbq_server::file_state::FileKey;
use smbq_server::fnv::fnv1a;

/// A node's entry under `nodes/`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeRecord {
    /// Seconds since the Unix epoch when the node joined.
    pub since: u64,
    /// The node's range of open ids (crate::ClusterConfig::open_ids).
    #[serde(default)]
    pub open_ids: u32,
}

/// An open of a file, as other nodes see it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OpenRecord {
    /// The access other opens are checked against (MS-FSA 2.1.5.1.2.1).
    pub access: u32,
    pub share_access: u32,
    /// The share-relative path at admission, for operators.
    pub path: String,
    /// What the open may cache, as lease state bits (R 1, H 2, W 4; an oplock as its lease
    /// equivalent): another node's admission asks this node to break it.
    #[serde(default)]
    pub caching: u32,
}

/// A request to node HOLDER to break its caching for an open of another node (MS-SMB2
/// 3.3.4.6, 3.3.4.7): what that open asks, as the holder's own admission check would see it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct BreakRequest {
    /// The access checked against the holder's opens.
    pub granted: u32,
    pub share_access: u32,
    /// The new open may change data: read caching goes too, as a write would break it.
    pub writes: bool,
}

/// A persistent open (a continuously available share) as other nodes must meet it also when
/// its node died and no node holds it yet (crate::ca): its share mode and byte-range locks
/// stand until a node takes it over or it expires.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hold {
    /// The node holding the open.
    pub node: String,
    pub access: u32,
    pub share_access: u32,
    /// The share-relative path, for other nodes' directory renames.
    pub path: String,
    /// (offset, length, exclusive).
    pub locks: Vec<(u64, u64, bool)>,
    /// What the open caches, as lease state bits (an oplock as its lease equivalent).
    pub caching: u32,
    /// Its client is away: the open waits for a reclaim on its node.
    pub away: bool,
}

/// A persistent open's record in etcd: the record a server restores it from, and the node
/// that holds it now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CaRecord {
    pub node: String,
    /// The volume of the record's file ([`Volumes`]): each node restores it on its own
    /// device number.
    pub volume: String,
    pub record: smbq_server::durable::store::Record,
}

/// Which file system a device number is on, by a name every node gives it: a file is
/// (volume, inode, stream) across nodes, because the same file system shows a different
/// device number on each mount (FUSE file systems such as MooseFS, and often on each host).
/// Inode numbers of a shared file system are the same on every mount (CephFS, MooseFS,
/// NFS).
#[derive(Debug, Clone, Default)]
pub struct Volumes {
    by_dev: HashMap<u64, String>,
    by_name: HashMap<String, u64>,
}

impl Volumes {
    /// Volumes named by `(device, name)` pairs: a device named twice keeps the first name
    /// in sort order, without case (share names compare without case), so every node that
    /// has the same names picks the same one.
    pub fn new(named: &[(u64, String)]) -> Volumes {
        let mut named: Vec<(u64, String)> = named
            .iter()
            .map(|(dev, name)| (*dev, name.to_lowercase()))
            .collect();
        named.sort_by(|a, b| a.1.cmp(&b.1));
        let mut v = Volumes::default();
        for (dev, name) in named {
            if v.by_dev.contains_key(&dev) {
                continue;
            }
            // Short, separator-free, and the same on every node and in every release.
            let id = format!("v{:x}", fnv1a(name.as_bytes()));
            v.by_name.insert(id.clone(), dev);
            v.by_dev.insert(dev, id);
        }
        v
    }

    pub(crate) fn id(&self, dev: u64) -> String {
        match self.by_dev.get(&dev) {
            Some(id) => id.clone(),
            None => format!("d{dev:x}"),
        }
    }

    /// The device this node sees volume `id` on.
    pub(crate) fn dev(&self, id: &str) -> Option<u64> {
        if let Some(dev) = id.strip_prefix('d') {
            return u64::from_str_radix(dev, 16).ok();
        }
        self.by_name.get(id).copied()
    }
}

/// The key layout under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
    volumes: Arc<Volumes>,
}

impl Keys {
    /// `prefix` ends with `/` (added when missing).
    pub fn new(prefix: &str, volumes: Volumes) -> Keys {
        let mut prefix = prefix.to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Keys {
            prefix,
            volumes: Arc::new(volumes),
        }
    }

    pub fn node(&self, node: &str) -> String {
        format!("{}nodes/{node}", self.prefix)
    }

    pub fn nodes(&self) -> String {
        format!("{}nodes/", self.prefix)
    }

    /// Share `name`'s mark (crate::marks); share names compare without case.
    pub fn share(&self, name: &str) -> String {
        format!("{}shares/{}", self.prefix, name.to_lowercase())
    }

    /// This node's view of the volumes.
    pub fn volumes(&self) -> &Volumes {
        &self.volumes
    }

    /// Every persistent open's record.
    pub fn cas(&self) -> String {
        format!("{}ca/", self.prefix)
    }

    /// Persistent open `id`'s record.
    pub fn ca(&self, id: u64) -> String {
        format!("{}{id:016x}", self.cas())
    }

    /// Persistent open `id`'s hold on its file.
    pub fn hold(&self, f: FileKey, id: u64) -> String {
        format!("{}p/{id:x}", self.file(f))
    }

    /// A request to hand persistent open `id` over to another node (crate::ca).
    pub fn handover(&self, f: FileKey, id: u64) -> String {
        format!("{}h/{id:x}", self.file(f))
    }

    /// A request for open `id` standing while its asker waits (crate::ca).
    pub fn want(&self, id: u64) -> String {
        format!("{}want/{id:016x}", self.prefix)
    }

    /// Every key of every file, for the watch.
    pub fn files(&self) -> String {
        format!("{}f/", self.prefix)
    }

    /// Every key of one file (a range read).
    pub fn file(&self, f: FileKey) -> String {
        let volume = self.volumes.id(f.dev);
        format!("{}f/{volume}.{:x}.{:x}/", self.prefix, f.ino, f.stream)
    }

    pub fn version(&self, f: FileKey) -> String {
        format!("{}v", self.file(f))
    }

    pub fn delete_pending(&self, f: FileKey) -> String {
        format!("{}dp", self.file(f))
    }

    pub fn open(&self, f: FileKey, node: &str, open_id: u64) -> String {
        format!("{}o/{node}/{open_id:x}", self.file(f))
    }

    /// Every lock one open holds on the file.
    pub fn locks_of(&self, f: FileKey, node: &str, open_id: u64) -> String {
        format!("{}l/{node}/{open_id:x}/", self.file(f))
    }

    /// Locks of one range by one open (a prefix: the same range may be locked twice).
    pub fn lock_range(&self, f: FileKey, node: &str, owner: u64, range: (u64, u64)) -> String {
        format!(
            "{}{:x}.{:x}.",
            self.locks_of(f, node, owner),
            range.0,
            range.1
        )
    }

    pub fn lock(
        &self,
        f: FileKey,
        node: &str,
        owner: u64,
        lock: (u64, u64, bool),
        seq: u64,
    ) -> String {
        let kind = if lock.2 { 'x' } else { 's' };
        format!(
            "{}{kind}/{seq:x}",
            self.lock_range(f, node, owner, (lock.0, lock.1))
        )
    }

    pub fn ack(&self, f: FileKey, node: &str) -> String {
        format!("{}k/{node}", self.file(f))
    }

    /// The revision of another node's admission up to which NODE flushed the file.
    pub fn flushed(&self, f: FileKey, node: &str) -> String {
        format!("{}fl/{node}", self.file(f))
    }

    /// The break requests of one file.
    pub fn breaks(&self, f: FileKey) -> String {
        format!("{}b/", self.file(f))
    }

    pub fn break_request(&self, f: FileKey, holder: &str, requester: &str, seq: u64) -> String {
        format!("{}{holder}/{requester}.{seq:x}", self.breaks(f))
    }

    /// What a key under `f/` says: its file and what it is.
    pub fn parse(&self, key: &str) -> Option<(FileKey, Entry)> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix("f/")?;
        let (file, rest) = rest.split_once('/')?;
        let mut ids = file.split('.');
        let dev = self.volumes.dev(ids.next()?)?;
        let mut hex = || u64::from_str_radix(ids.next()?, 16).ok();
        let f = FileKey {
            dev,
            ino: hex()?,
            stream: hex()?,
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let entry = match parts.as_slice() {
            ["v"] => Entry::Version,
            ["dp"] => Entry::DeletePending,
            ["o", node, open] => Entry::Open {
                node: (*node).to_owned(),
                open_id: u64::from_str_radix(open, 16).ok()?,
            },
            ["l", node, open, range, _seq] => {
                let mut nums = range.split('.');
                let offset = u64::from_str_radix(nums.next()?, 16).ok()?;
                let length = u64::from_str_radix(nums.next()?, 16).ok()?;
                let exclusive = match nums.next()? {
                    "x" => true,
                    "s" => false,
                    _ => return None,
                };
                Entry::Lock {
                    node: (*node).to_owned(),
                    owner: u64::from_str_radix(open, 16).ok()?,
                    lock: (offset, length, exclusive),
                }
            }
            ["b", holder, _tag] => Entry::Break {
                holder: (*holder).to_owned(),
            },
            ["k", node] => Entry::Ack {
                node: (*node).to_owned(),
            },
            ["fl", node] => Entry::Flushed {
                node: (*node).to_owned(),
            },
            ["p", open] => Entry::Hold {
                open_id: u64::from_str_radix(open, 16).ok()?,
            },
            ["h", open] => Entry::Handover {
                open_id: u64::from_str_radix(open, 16).ok()?,
            },
            _ => return None,
        };
        Some((f, entry))
    }
}

/// What a key of a file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Version,
    DeletePending,
    Open {
        node: String,
        open_id: u64,
    },
    Lock {
        node: String,
        owner: u64,
        lock: (u64, u64, bool),
    },
    /// A break request to node `holder`.
    Break {
        holder: String,
    },
    /// What node `node` has seen of the file.
    Ack {
        node: String,
    },
    /// Up to which admission of another node `node` flushed the file.
    Flushed {
        node: String,
    },
    /// A persistent open's hold ([`Hold`]).
    Hold {
        open_id: u64,
    },
    /// A node asks for persistent open `open_id` (its value names the node).
    Handover {
        open_id: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileKey = FileKey {
        dev: 0x803,
        ino: 0x1234,
        stream: 0,
    };

    #[test]
    fn every_key_of_a_file_parses_back() {
        let k = Keys::new("/smbq", Volumes::default());
        assert_eq!(k.parse(&k.version(F)), Some((F, Entry::Version)));
        assert_eq!(
            k.parse(&k.delete_pending(F)),
            Some((F, Entry::DeletePending))
        );
        let open = Entry::Open {
            node: "b".into(),
            open_id: 77,
        };
        assert_eq!(k.parse(&k.open(F, "b", 77)), Some((F, open)));
        let brk = Entry::Break {
            holder: "n1".into(),
        };
        let key = k.break_request(F, "n1", "n2", 5);
        assert!(key.starts_with(&k.breaks(F)));
        assert_eq!(k.parse(&key), Some((F, brk)));
        let ack = Entry::Ack { node: "n3".into() };
        assert_eq!(k.parse(&k.ack(F, "n3")), Some((F, ack)));
        let flushed = Entry::Flushed { node: "n3".into() };
        assert_eq!(k.parse(&k.flushed(F, "n3")), Some((F, flushed)));
        let hold = Entry::Hold { open_id: 0xabc };
        assert_eq!(k.parse(&k.hold(F, 0xabc)), Some((F, hold)));
        let handover = Entry::Handover { open_id: 0xabc };
        assert_eq!(k.parse(&k.handover(F, 0xabc)), Some((F, handover)));
        // A persistent open's record is not a key of a file.
        assert_eq!(k.parse(&k.ca(0xabc)), None);
        assert!(k.ca(0xabc).starts_with(&k.cas()));
        for exclusive in [true, false] {
            let key = k.lock(F, "a", 9, (100, u64::MAX, exclusive), 3);
            let lock = Entry::Lock {
                node: "a".into(),
                owner: 9,
                lock: (100, u64::MAX, exclusive),
            };
            assert_eq!(k.parse(&key), Some((F, lock)));
            assert!(key.starts_with(&k.lock_range(F, "a", 9, (100, u64::MAX))));
            assert!(key.starts_with(&k.locks_of(F, "a", 9)));
        }
        // An unlock takes the last key of the range first (crate::store::Store::unlock): an
        // exclusive lock, whatever the sequence numbers, as the local table does.
        assert!(k.lock(F, "a", 9, (1, 2, true), 0) > k.lock(F, "a", 9, (1, 2, false), u64::MAX));
    }

    #[test]
    fn keys_of_other_prefixes_and_bad_keys_are_not_files() {
        let k = Keys::new("/smbq/", Volumes::default());
        let other = Keys::new("/other/", Volumes::default());
        assert_eq!(k.parse(&other.version(F)), None);
        for bad in [
            "/smbq/f/d1.2/v",
            "/smbq/f/d1.2.3/x",
            "/smbq/f/d1.2.3/o/n",
            "/smbq/f/dz.2.3/v",
            "/smbq/f/1.2.3/v",
            "/smbq/f/v1234.2.3/v",
        ] {
            assert_eq!(k.parse(bad), None, "{bad}");
        }
        // Streams of one file are distinct files here, and one file's prefix is no other's.
        let s = FileKey { stream: 1, ..F };
        let f10 = FileKey { stream: 0x10, ..F };
        assert!(!k.file(f10).starts_with(&k.file(s)));
    }

    #[test]
    fn a_file_has_one_key_on_every_node_whatever_its_device_there() {
        // Node A mounts the shared file system as device 0x2d, node B as 0x31; both serve
        // it as shares "data" and "Home" (the first name in sort order, without case, names
        // it; node B spells them "home" and "DATA").
        let a = Keys::new(
            "/smbq/",
            Volumes::new(&[(0x2d, "data".into()), (0x2d, "Home".into())]),
        );
        let b = Keys::new(
            "/smbq/",
            Volumes::new(&[(0x31, "home".into()), (0x31, "DATA".into())]),
        );
        let on_a = FileKey { dev: 0x2d, ..F };
        let on_b = FileKey { dev: 0x31, ..F };
        assert_eq!(a.open(on_a, "n", 1), b.open(on_b, "n", 1));
        assert!(a.file(on_a).contains("/f/v"), "{}", a.file(on_a));
        // Each node reads the other's key as its own device.
        let entry = Entry::Open {
            node: "n".into(),
            open_id: 1,
        };
        assert_eq!(b.parse(&a.open(on_a, "n", 1)), Some((on_b, entry)));
        // A device no share names keeps its number, and another volume is another file.
        let other = FileKey { dev: 0x99, ..F };
        assert_eq!(a.parse(&a.version(other)), Some((other, Entry::Version)));
        let c = Keys::new("/smbq/", Volumes::new(&[(0x2d, "other".into())]));
        assert_ne!(a.file(on_a), c.file(on_a));
        assert_eq!(
            b.parse(&c.version(on_a)),
            None,
            "a volume node B does not have"
        );
    }
}
