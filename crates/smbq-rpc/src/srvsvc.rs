//! The Server Service Remote Protocol (MS-SRVS), interface
//! `4b324fc8-1670-01d3-1278-5a47bf6ee188` v3.0: the calls share browsers make.
//!
//! Union arms follow the MS-SRVS IDL (and Samba's srvsvc.idl where it has extra cases, so that
//! either kind of client unmarshals our answers): a level with a pointer arm always gets its
//! pointer (NULL on error); a level with no arm gets nothing after the discriminant.

use crate::ndr::{NdrError, NdrReader, NdrWriter};
use crate::pdu::{SyntaxId, Uuid};
use std::sync::Arc;

pub const SRVSVC_SYNTAX: SyntaxId = SyntaxId {
    uuid: Uuid::from_fields(
        0x4b324fc8,
        0x1670,
        0x01d3,
        [0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88],
    ),
    version: 3,
};

/// MS-SRVS 3.1.4 opnums served here; every other opnum gets nca_s_op_rng_error.
pub mod opnum {
    pub const NETR_SHARE_ENUM: u16 = 15;
    pub const NETR_SHARE_GET_INFO: u16 = 16;
    pub const NETR_SERVER_GET_INFO: u16 = 21;
    pub const NETR_SHARE_ENUM_STICKY: u16 = 36;
}

/// Win32 error codes returned as the WERROR result (MS-ERREF 2.2).
pub mod werror {
    pub const OK: u32 = 0;
    pub const INVALID_LEVEL: u32 = 124;
    pub const NET_NAME_NOT_FOUND: u32 = 2310;
}

/// MS-SRVS 2.2.2.4 share types.
pub const STYPE_DISKTREE: u32 = 0;
pub const STYPE_IPC: u32 = 3;
pub const STYPE_SPECIAL: u32 = 0x8000_0000;

/// MS-SRVS 2.2.2.1 / 2.2.2.5 server info constants.
pub const PLATFORM_ID_NT: u32 = 500;
pub const SV_TYPE_WORKSTATION: u32 = 0x0000_0001;
pub const SV_TYPE_SERVER: u32 = 0x0000_0002;
pub const SV_TYPE_NT: u32 = 0x0000_1000;
pub const SV_TYPE_SERVER_NT: u32 = 0x0000_8000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    Disk,
    Ipc,
}

/// One share as listed to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareInfo {
    pub name: String,
    pub kind: ShareKind,
    pub comment: String,
    /// Shown at levels 2 and 502 exactly as given (Windows shows `C:\share`; Samba shows `C:`
    /// followed by the POSIX path with `\` separators).
    pub path: String,
}

impl ShareInfo {
    /// MS-SRVS 2.2.2.4: the base type, with STYPE_SPECIAL for administrative (`$`) shares.
    pub fn share_type(&self) -> u32 {
        let base = match self.kind {
            ShareKind::Disk => STYPE_DISKTREE,
            ShareKind::Ipc => STYPE_IPC,
        };
        if self.is_special() {
            base | STYPE_SPECIAL
        } else {
            base
        }
    }

    fn is_special(&self) -> bool {
        self.name.ends_with('$')
    }
}

/// Where the listed shares come from (the server's share registry).
pub trait ShareSource: Send + Sync {
    fn shares(&self) -> Vec<ShareInfo>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// Opnum not served: nca_s_op_rng_error.
    OpRange,
    /// The stub did not unmarshal.
    BadStub(NdrError),
}

impl From<NdrError> for CallError {
    fn from(e: NdrError) -> Self {
        CallError::BadStub(e)
    }
}

/// Levels with a pointer arm in SHARE_ENUM_UNION / SHARE_INFO (MS-SRVS 2.2.3.2, 2.2.3.6) or in
/// Samba's srvsvc_NetShareCtr / srvsvc_NetShareInfo.
const SHARE_ARMS: [u32; 11] = [0, 1, 2, 501, 502, 503, 1004, 1005, 1006, 1007, 1501];

/// Levels with a pointer arm in SERVER_INFO (MS-SRVS 2.2.3.7) or Samba's srvsvc_NetSrvInfo.
const SERVER_ARMS: &[u32] = &[
    100, 101, 102, 103, 402, 403, 502, 503, 599, 1005, 1010, 1016, 1017, 1018, 1107, 1501, 1502,
    1503, 1506, 1509, 1510, 1511, 1512, 1513, 1514, 1515, 1516, 1518, 1520, 1521, 1522, 1523, 1524,
    1525, 1528, 1529, 1530, 1533, 1534, 1535, 1536, 1537, 1538, 1539, 1540, 1541, 1542, 1543, 1544,
    1545, 1546, 1547, 1548, 1549, 1550, 1552, 1553, 1554, 1555, 1556,
];

/// Wire shape of one member of an info structure.
#[derive(Clone, Copy)]
enum Kind {
    U32,
    /// `[string] wchar_t*`
    Str,
    /// `[size_is(previous member)] unsigned char*`
    Bytes,
}

/// Member shapes of SHARE_INFO_<level> (MS-SRVS 2.2.4.22 - 2.2.4.31), used to step over entries
/// a client puts in the [in] container.
fn share_info_kinds(level: u32) -> Option<&'static [Kind]> {
    use Kind::*;
    Some(match level {
        0 | 1004 => &[Str],
        1 => &[Str, U32, Str],
        2 => &[Str, U32, Str, U32, U32, U32, Str, Str],
        501 => &[Str, U32, Str, U32],
        502 => &[Str, U32, Str, U32, U32, U32, Str, Str, U32, Bytes],
        503 => &[Str, U32, Str, U32, U32, U32, Str, Str, Str, U32, Bytes],
        1005 | 1006 => &[U32],
        1007 => &[U32, Str],
        1501 => &[U32, Bytes],
        _ => return None,
    })
}

/// One member's value on output.
enum Field<'a> {
    U32(u32),
    Str(Option<&'a str>),
    Bytes(Option<&'a [u8]>),
}

/// The embedded part of a structure: scalars, with pointers as referent ids (C706 14.3.12.1).
fn write_scalars(w: &mut NdrWriter, fields: &[Field<'_>]) {
    for f in fields {
        match f {
            Field::U32(v) => w.u32(*v),
            Field::Str(s) => w.pointer(s.is_some()),
            Field::Bytes(b) => w.pointer(b.is_some()),
        };
    }
}

/// The deferred referents of a structure, in member order (C706 14.3.12.3).
fn write_deferred(w: &mut NdrWriter, fields: &[Field<'_>]) {
    for f in fields {
        match f {
            Field::Str(Some(s)) => {
                w.wstring(s);
            }
            Field::Bytes(Some(b)) => {
                w.conformant_bytes(b);
            }
            _ => {}
        }
    }
}

/// SHARE_INFO_<level> values for one share; `None` for levels not served.
fn share_fields(s: &ShareInfo, level: u32) -> Option<Vec<Field<'_>>> {
    let name = Field::Str(Some(&s.name));
    let comment = || Field::Str(Some(&s.comment));
    let ty = Field::U32(s.share_type());
    Some(match level {
        0 => vec![name],
        1 => vec![name, ty, comment()],
        2 | 502 => {
            // permissions (ignored in user-level security), max_uses unlimited, current_uses
            // not tracked, path, and no share password.
            let mut v = vec![
                name,
                ty,
                comment(),
                Field::U32(0),
                Field::U32(u32::MAX),
                Field::U32(0),
                Field::Str(Some(&s.path)),
                Field::Str(None),
            ];
            if level == 502 {
                // shi502_reserved = 0 and no security descriptor.
                v.extend([Field::U32(0), Field::Bytes(None)]);
            }
            v
        }
        501 => vec![name, ty, comment(), Field::U32(0)],
        1004 => vec![comment()],
        // shi1005_flags: not in DFS, manual caching.
        1005 => vec![Field::U32(0)],
        1006 => vec![Field::U32(u32::MAX)],
        _ => return None,
    })
}

pub(crate) struct Srvsvc {
    server_name: String,
    source: Arc<dyn ShareSource>,
}

impl Srvsvc {
    pub(crate) fn new(server_name: String, source: Arc<dyn ShareSource>) -> Self {
        Self {
            server_name,
            source,
        }
    }

    /// Runs one call: the request stub in, the response stub out.
    pub(crate) fn call(&self, opnum: u16, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        match opnum {
            opnum::NETR_SHARE_ENUM => self.share_enum(stub, true),
            opnum::NETR_SHARE_ENUM_STICKY => self.share_enum(stub, false),
            opnum::NETR_SHARE_GET_INFO => self.share_get_info(stub),
            opnum::NETR_SERVER_GET_INFO => self.server_get_info(stub),
            _ => Err(CallError::OpRange),
        }
    }

    /// The configured shares, plus IPC$ (it exists whenever this pipe is reachable).
    fn shares(&self) -> Vec<ShareInfo> {
        let mut v = self.source.shares();
        if !v.iter().any(|s| s.name.eq_ignore_ascii_case("IPC$")) {
            v.push(ShareInfo {
                name: "IPC$".into(),
                kind: ShareKind::Ipc,
                comment: "Remote IPC".into(),
                path: String::new(),
            });
        }
        v
    }

    /// MS-SRVS 3.1.4.8 NetrShareEnum (opnum 15) and 3.1.4.9 NetrShareEnumSticky (opnum 36):
    /// `(ServerName [unique string], InfoStruct [in,out] SHARE_ENUM_STRUCT*,
    /// PreferedMaximumLength, TotalEntries [out], ResumeHandle [in,out,unique])` -> WERROR.
    ///
    /// Like Samba, every entry from the resume handle on is returned whatever
    /// PreferedMaximumLength says, and the sticky variant leaves out `$` shares.
    fn share_enum(&self, stub: &[u8], include_special: bool) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        read_server_name(&mut r)?;
        // SHARE_ENUM_STRUCT: Level, then the non-encapsulated union (discriminant again, arm).
        let level = r.u32()?;
        let disc = r.u32()?;
        if disc != level {
            return Err(NdrError::SwitchMismatch {
                expected: level,
                got: disc,
            }
            .into());
        }
        let has_arm = SHARE_ARMS.contains(&level);
        if has_arm && r.pointer()? {
            let count = r.u32()?;
            if r.pointer()? {
                let kinds = share_info_kinds(level).ok_or(NdrError::Invalid("container level"))?;
                skip_entries(&mut r, count, kinds)?;
            }
        }
        let _prefered_maximum_length = r.u32()?;
        let resume = if r.pointer()? { Some(r.u32()?) } else { None };

        let mut w = NdrWriter::new();
        w.u32(level).u32(level);
        let all: Vec<ShareInfo> = self
            .shares()
            .into_iter()
            .filter(|s| include_special || !s.is_special())
            .collect();
        let start = resume.map_or(0, |h| h as usize).min(all.len());
        let listed = all.get(start..).unwrap_or_default();
        let rows: Option<Vec<Vec<Field<'_>>>> =
            listed.iter().map(|s| share_fields(s, level)).collect();
        let supported = matches!(level, 0 | 1 | 2 | 501 | 502);
        let (total, result) = match rows {
            Some(rows) if supported => {
                let n = u32::try_from(rows.len()).unwrap_or(u32::MAX);
                w.pointer(true);
                w.u32(n).pointer(n > 0);
                if n > 0 {
                    w.u32(n);
                    for row in &rows {
                        write_scalars(&mut w, row);
                    }
                    for row in &rows {
                        write_deferred(&mut w, row);
                    }
                }
                (n, werror::OK)
            }
            _ => {
                if has_arm {
                    w.pointer(false);
                }
                (0, werror::INVALID_LEVEL)
            }
        };
        w.u32(total);
        match resume {
            // Everything was returned, so enumeration restarts from the beginning.
            Some(_) => w.pointer(true).u32(0),
            None => w.pointer(false),
        };
        w.u32(result);
        Ok(w.into_vec())
    }

    /// MS-SRVS 3.1.4.10 NetrShareGetInfo (opnum 16):
    /// `(ServerName [unique string], NetName [ref string], Level, InfoStruct [out] SHARE_INFO*)`.
    fn share_get_info(&self, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        read_server_name(&mut r)?;
        let net_name = r.wstring()?;
        let level = r.u32()?;

        let mut w = NdrWriter::new();
        w.u32(level);
        let shares = self.shares();
        let found = shares.iter().find(|s| names_equal(&s.name, &net_name));
        let result = match found.map(|s| share_fields(s, level)) {
            Some(Some(fields)) => {
                w.pointer(true);
                write_scalars(&mut w, &fields);
                write_deferred(&mut w, &fields);
                werror::OK
            }
            other => {
                if SHARE_ARMS.contains(&level) {
                    w.pointer(false);
                }
                let known_level = matches!(level, 0 | 1 | 2 | 501 | 502 | 1004 | 1005 | 1006);
                if other.is_none() && known_level {
                    werror::NET_NAME_NOT_FOUND
                } else {
                    werror::INVALID_LEVEL
                }
            }
        };
        w.u32(result);
        Ok(w.into_vec())
    }

    /// MS-SRVS 3.1.4.17 NetrServerGetInfo (opnum 21):
    /// `(ServerName [unique string], Level, InfoStruct [out] SERVER_INFO*)`.
    fn server_get_info(&self, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        read_server_name(&mut r)?;
        let level = r.u32()?;

        let name = Field::Str(Some(self.server_name.as_str()));
        let server_type = SV_TYPE_WORKSTATION | SV_TYPE_SERVER | SV_TYPE_NT | SV_TYPE_SERVER_NT;
        let base = |name| {
            vec![
                Field::U32(PLATFORM_ID_NT),
                name,
                Field::U32(10),
                Field::U32(0),
                Field::U32(server_type),
                Field::Str(Some("")),
            ]
        };
        let fields = match level {
            100 => Some(vec![Field::U32(PLATFORM_ID_NT), name]),
            101 => Some(base(name)),
            102 => {
                // MS-SRVS 2.2.4.43: users unlimited, autodisconnect 15 min, not hidden,
                // announce every 240 s with 3000 ms jitter, licenses (ignored), user path.
                let mut v = base(name);
                v.extend([
                    Field::U32(u32::MAX),
                    Field::U32(15),
                    Field::U32(0),
                    Field::U32(240),
                    Field::U32(3000),
                    Field::U32(100_000),
                    Field::Str(Some("C:\\")),
                ]);
                Some(v)
            }
            _ => None,
        };
        let mut w = NdrWriter::new();
        w.u32(level);
        let result = match fields {
            Some(fields) => {
                w.pointer(true);
                write_scalars(&mut w, &fields);
                write_deferred(&mut w, &fields);
                werror::OK
            }
            None => {
                if SERVER_ARMS.contains(&level) {
                    w.pointer(false);
                }
                werror::INVALID_LEVEL
            }
        };
        w.u32(result);
        Ok(w.into_vec())
    }
}

/// SRVSVC_HANDLE ServerName: `[in, string, unique] wchar_t*`. Its value is not used: this
/// endpoint answers for the server whatever name the client used to reach it.
fn read_server_name(r: &mut NdrReader<'_>) -> Result<Option<String>, NdrError> {
    if r.pointer()? {
        Ok(Some(r.wstring()?))
    } else {
        Ok(None)
    }
}

/// Steps over a conformant array of `count` info structures (C706 14.3.3.2, 14.3.12): the
/// max_count, every entry's scalars, then every entry's deferred referents.
fn skip_entries(r: &mut NdrReader<'_>, count: u32, kinds: &[Kind]) -> Result<(), NdrError> {
    let max = r.array_count(kinds.len() * 4)?;
    if max != count {
        return Err(NdrError::Invalid("array size differs from EntriesRead"));
    }
    // Bounded: `max * kinds.len() * 4` octets were shown to be present.
    let mut present = Vec::with_capacity(max as usize * kinds.len());
    for _ in 0..max {
        for k in kinds {
            match k {
                Kind::U32 => {
                    r.u32()?;
                    present.push(false);
                }
                Kind::Str | Kind::Bytes => present.push(r.pointer()?),
            }
        }
    }
    for (i, p) in present.iter().enumerate() {
        if !*p {
            continue;
        }
        match kinds.get(i % kinds.len()) {
            Some(Kind::Str) => {
                r.wstring()?;
            }
            Some(Kind::Bytes) => {
                r.conformant_bytes()?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Share names compare case-insensitively (MS-SRVS 3.1.4.10 uses the ShareList lookup, which
/// Windows does without regard to case).
fn names_equal(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || a.to_lowercase() == b.to_lowercase()
}
