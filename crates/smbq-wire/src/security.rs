//! Windows security descriptors as QUERY_INFO / SET_INFO carry them with InfoType
//! SMB2_0_INFO_SECURITY (MS-SMB2 2.2.37, 2.2.39): SID (MS-DTYP 2.4.2), ACE (2.4.4), ACL (2.4.5)
//! and the self-relative SECURITY_DESCRIPTOR (2.4.6), plus the POSIX owner/group/mode mapping
//! a Unix server presents (Samba's S-1-22-1-uid / S-1-22-2-gid convention).

use core::fmt;
use core::str::FromStr;

use crate::cursor::{Reader, Writer, len16, len32, to_usize};
use crate::error::DecodeError;
use crate::fscc::access::{
    DELETE, FILE_DELETE_CHILD, FILE_GENERIC_EXECUTE, FILE_GENERIC_READ, FILE_GENERIC_WRITE,
    FILE_READ_ATTRIBUTES, FILE_WRITE_ATTRIBUTES, READ_CONTROL, SYNCHRONIZE, WRITE_DAC, WRITE_OWNER,
};

/// MS-DTYP 2.4.2: at most 15 sub-authorities.
pub const MAX_SUB_AUTHORITIES: usize = 15;
/// Cap on ACEs decoded from one ACL (an AclSize of 64 KiB could otherwise hold ~4000).
pub const MAX_ACES: usize = 1024;
/// Size of the self-relative SECURITY_DESCRIPTOR header (MS-DTYP 2.4.6).
pub const SD_HEADER_LEN: usize = 20;
/// Size of the ACL header (MS-DTYP 2.4.5).
pub const ACL_HEADER_LEN: usize = 8;
/// ACL_REVISION and ACL_REVISION_DS (MS-DTYP 2.4.5); DS is required once object ACEs appear.
pub const ACL_REVISION: u8 = 2;
pub const ACL_REVISION_DS: u8 = 4;

/// AdditionalInformation / SecurityInformation bits selecting descriptor parts (MS-SMB2 2.2.37).
pub mod info {
    pub const OWNER_SECURITY_INFORMATION: u32 = 0x0000_0001;
    pub const GROUP_SECURITY_INFORMATION: u32 = 0x0000_0002;
    pub const DACL_SECURITY_INFORMATION: u32 = 0x0000_0004;
    pub const SACL_SECURITY_INFORMATION: u32 = 0x0000_0008;
    pub const LABEL_SECURITY_INFORMATION: u32 = 0x0000_0010;
    pub const ATTRIBUTE_SECURITY_INFORMATION: u32 = 0x0000_0020;
    pub const SCOPE_SECURITY_INFORMATION: u32 = 0x0000_0040;
    pub const BACKUP_SECURITY_INFORMATION: u32 = 0x0001_0000;
}

/// SECURITY_DESCRIPTOR Control bits (MS-DTYP 2.4.6), as the little-endian u16 on the wire.
pub mod control {
    pub const SE_OWNER_DEFAULTED: u16 = 0x0001;
    pub const SE_GROUP_DEFAULTED: u16 = 0x0002;
    pub const SE_DACL_PRESENT: u16 = 0x0004;
    pub const SE_DACL_DEFAULTED: u16 = 0x0008;
    pub const SE_SACL_PRESENT: u16 = 0x0010;
    pub const SE_SACL_DEFAULTED: u16 = 0x0020;
    pub const SE_DACL_TRUSTED: u16 = 0x0040;
    pub const SE_SERVER_SECURITY: u16 = 0x0080;
    pub const SE_DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
    pub const SE_SACL_AUTO_INHERIT_REQ: u16 = 0x0200;
    pub const SE_DACL_AUTO_INHERITED: u16 = 0x0400;
    pub const SE_SACL_AUTO_INHERITED: u16 = 0x0800;
    pub const SE_DACL_PROTECTED: u16 = 0x1000;
    pub const SE_SACL_PROTECTED: u16 = 0x2000;
    pub const SE_RM_CONTROL_VALID: u16 = 0x4000;
    pub const SE_SELF_RELATIVE: u16 = 0x8000;
}

/// ACE header flags (MS-DTYP 2.4.4.1).
pub mod ace_flags {
    pub const OBJECT_INHERIT_ACE: u8 = 0x01;
    pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
    pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
    pub const INHERIT_ONLY_ACE: u8 = 0x08;
    pub const INHERITED_ACE: u8 = 0x10;
    pub const SUCCESSFUL_ACCESS_ACE_FLAG: u8 = 0x40;
    pub const FAILED_ACCESS_ACE_FLAG: u8 = 0x80;
}

/// A security identifier (MS-DTYP 2.4.2.2): Revision, SubAuthorityCount, a 48-bit big-endian
/// IdentifierAuthority, then little-endian sub-authorities.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sid {
    pub revision: u8,
    pub authority: [u8; 6],
    pub sub_authorities: Vec<u32>,
}

/// Authorities of the well-known SIDs (MS-DTYP 2.4.2.4).
const WORLD_AUTHORITY: u64 = 1;
const CREATOR_AUTHORITY: u64 = 3;
const NT_AUTHORITY: u64 = 5;
/// Samba's "Unix users/groups" authority: S-1-22-1-<uid>, S-1-22-2-<gid>.
const UNIX_AUTHORITY: u64 = 22;

impl Sid {
    /// A revision-1 SID. More than 15 sub-authorities cannot be encoded; see [`Sid::is_valid`].
    pub fn new(authority: u64, sub_authorities: &[u32]) -> Self {
        let b = authority.to_be_bytes();
        Self {
            revision: 1,
            authority: [b[2], b[3], b[4], b[5], b[6], b[7]],
            sub_authorities: sub_authorities.to_vec(),
        }
    }

    pub fn authority_value(&self) -> u64 {
        let a = self.authority;
        u64::from_be_bytes([0, 0, a[0], a[1], a[2], a[3], a[4], a[5]])
    }

    /// S-1-0-0 Nobody (the NULL SID, MS-DTYP 2.4.2.4).
    pub fn nobody() -> Self {
        Self::new(0, &[0])
    }
    /// S-1-1-0 Everyone.
    pub fn everyone() -> Self {
        Self::new(WORLD_AUTHORITY, &[0])
    }
    /// S-1-3-0 CREATOR OWNER.
    pub fn creator_owner() -> Self {
        Self::new(CREATOR_AUTHORITY, &[0])
    }
    /// S-1-3-1 CREATOR GROUP.
    pub fn creator_group() -> Self {
        Self::new(CREATOR_AUTHORITY, &[1])
    }
    /// S-1-5-11 Authenticated Users.
    pub fn authenticated_users() -> Self {
        Self::new(NT_AUTHORITY, &[11])
    }
    /// S-1-5-18 Local System.
    pub fn local_system() -> Self {
        Self::new(NT_AUTHORITY, &[18])
    }
    /// S-1-5-32-544 BUILTIN\Administrators.
    pub fn builtin_administrators() -> Self {
        Self::new(NT_AUTHORITY, &[32, 544])
    }
    /// S-1-5-32-545 BUILTIN\Users.
    pub fn builtin_users() -> Self {
        Self::new(NT_AUTHORITY, &[32, 545])
    }
    /// S-1-22-1-`uid`: a Unix user as Samba presents it.
    pub fn unix_user(uid: u32) -> Self {
        Self::new(UNIX_AUTHORITY, &[1, uid])
    }
    /// S-1-22-2-`gid`: a Unix group as Samba presents it.
    pub fn unix_group(gid: u32) -> Self {
        Self::new(UNIX_AUTHORITY, &[2, gid])
    }

    /// The uid of an S-1-22-1-uid SID.
    pub fn as_unix_user(&self) -> Option<u32> {
        self.unix_id(1)
    }
    /// The gid of an S-1-22-2-gid SID.
    pub fn as_unix_group(&self) -> Option<u32> {
        self.unix_id(2)
    }
    fn unix_id(&self, kind: u32) -> Option<u32> {
        match (
            self.revision,
            self.authority_value(),
            self.sub_authorities.as_slice(),
        ) {
            (1, UNIX_AUTHORITY, &[k, id]) if k == kind => Some(id),
            _ => None,
        }
    }

    /// Revision 1 and at most 15 sub-authorities (MS-DTYP 2.4.2.2).
    pub fn is_valid(&self) -> bool {
        self.revision == 1 && self.sub_authorities.len() <= MAX_SUB_AUTHORITIES
    }

    /// Encoded size: 8 + 4 per sub-authority.
    pub fn encoded_len(&self) -> usize {
        8 + 4 * self.sub_authorities.len().min(MAX_SUB_AUTHORITIES)
    }

    /// Writes the SID; sub-authorities past the 15th are dropped (an invalid SID cannot be
    /// represented), so check [`Sid::is_valid`] for SIDs not built by the constructors here.
    pub fn encode(&self, w: &mut Writer) {
        let subs = self
            .sub_authorities
            .get(..MAX_SUB_AUTHORITIES)
            .unwrap_or(&self.sub_authorities);
        w.u8(self.revision)
            .u8(subs.len() as u8)
            .bytes(&self.authority);
        for s in subs {
            w.u32(*s);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        self.encode(&mut w);
        w.into_vec()
    }

    /// Reads one SID from `r`, rejecting revisions other than 1 and more than 15
    /// sub-authorities (MS-DTYP 2.4.2.2).
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let revision = r.u8()?;
        if revision != 1 {
            return Err(DecodeError::InvalidField {
                field: "Sid.Revision",
            });
        }
        let count = usize::from(r.u8()?);
        if count > MAX_SUB_AUTHORITIES {
            return Err(DecodeError::TooLong {
                field: "SubAuthorityCount",
                len: count,
                limit: MAX_SUB_AUTHORITIES,
            });
        }
        let authority = r.array()?;
        let mut sub_authorities = Vec::with_capacity(count);
        for _ in 0..count {
            sub_authorities.push(r.u32()?);
        }
        Ok(Self {
            revision,
            authority,
            sub_authorities,
        })
    }

    /// Decodes a SID from the start of `buf` (trailing bytes are ignored).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// MS-DTYP 2.4.2.1 string form: `S-1-<authority>-<sub>...`, the authority in decimal below 2^32
/// and as 0x-prefixed 12-digit hex otherwise.
impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = self.authority_value();
        write!(f, "S-{}-", self.revision)?;
        if auth < (1 << 32) {
            write!(f, "{auth}")?;
        } else {
            write!(f, "0x{auth:012X}")?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

/// Returned by [`Sid::from_str`] for text that is not an MS-DTYP 2.4.2.1 SID string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseSidError;

impl fmt::Display for ParseSidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid SID string")
    }
}

impl std::error::Error for ParseSidError {}

impl FromStr for Sid {
    type Err = ParseSidError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split('-');
        if !parts.next().is_some_and(|p| p.eq_ignore_ascii_case("S")) {
            return Err(ParseSidError);
        }
        let revision: u8 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or(ParseSidError)?;
        let auth_text = parts.next().ok_or(ParseSidError)?;
        let authority = match auth_text
            .strip_prefix("0x")
            .or_else(|| auth_text.strip_prefix("0X"))
        {
            Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| ParseSidError)?,
            None => auth_text.parse::<u64>().map_err(|_| ParseSidError)?,
        };
        if authority >= 1 << 48 {
            return Err(ParseSidError);
        }
        let mut subs = Vec::new();
        for p in parts {
            if subs.len() == MAX_SUB_AUTHORITIES {
                return Err(ParseSidError);
            }
            subs.push(p.parse::<u32>().map_err(|_| ParseSidError)?);
        }
        let mut sid = Sid::new(authority, &subs);
        sid.revision = revision;
        Ok(sid)
    }
}

crate::open_enum! {
    /// ACE types (MS-DTYP 2.4.4.1).
    AceType(u8) {
        ACCESS_ALLOWED = 0x00,
        ACCESS_DENIED = 0x01,
        SYSTEM_AUDIT = 0x02,
        SYSTEM_ALARM = 0x03,
        ACCESS_ALLOWED_COMPOUND = 0x04,
        ACCESS_ALLOWED_OBJECT = 0x05,
        ACCESS_DENIED_OBJECT = 0x06,
        SYSTEM_AUDIT_OBJECT = 0x07,
        SYSTEM_ALARM_OBJECT = 0x08,
        ACCESS_ALLOWED_CALLBACK = 0x09,
        ACCESS_DENIED_CALLBACK = 0x0A,
        ACCESS_ALLOWED_CALLBACK_OBJECT = 0x0B,
        ACCESS_DENIED_CALLBACK_OBJECT = 0x0C,
        SYSTEM_AUDIT_CALLBACK = 0x0D,
        SYSTEM_ALARM_CALLBACK = 0x0E,
        SYSTEM_AUDIT_CALLBACK_OBJECT = 0x0F,
        SYSTEM_ALARM_CALLBACK_OBJECT = 0x10,
        SYSTEM_MANDATORY_LABEL = 0x11,
        SYSTEM_RESOURCE_ATTRIBUTE = 0x12,
        SYSTEM_SCOPED_POLICY_ID = 0x13,
    }
}

impl AceType {
    /// Types laid out as Mask, Flags, [ObjectType], [InheritedObjectType], Sid (MS-DTYP 2.4.4.3).
    pub fn is_object(self) -> bool {
        matches!(self.0, 0x05..=0x08 | 0x0B | 0x0C | 0x0F | 0x10)
    }

    /// Types laid out as Mask then Sid (then optional application data).
    fn is_mask_sid(self) -> bool {
        matches!(self.0, 0x00..=0x03 | 0x09 | 0x0A | 0x0D | 0x0E | 0x11..=0x13)
    }
}

/// ObjectType present (MS-DTYP 2.4.4.3 Flags).
pub const ACE_OBJECT_TYPE_PRESENT: u32 = 0x1;
/// InheritedObjectType present (MS-DTYP 2.4.4.3 Flags).
pub const ACE_INHERITED_OBJECT_TYPE_PRESENT: u32 = 0x2;

/// The extra fields of an object ACE (MS-DTYP 2.4.4.3). Presence follows the options here; the
/// encoder derives the Flags bits from them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectAceData {
    pub object_type: Option<[u8; 16]>,
    pub inherited_object_type: Option<[u8; 16]>,
}

/// One ACE (MS-DTYP 2.4.4). `application_data` holds whatever follows the SID inside AceSize
/// (callback ACE data, resource attribute values, or padding), so decoded ACEs round-trip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ace {
    pub ace_type: AceType,
    pub flags: u8,
    pub mask: u32,
    pub sid: Sid,
    /// Set for object ACE types only.
    pub object: Option<ObjectAceData>,
    pub application_data: Vec<u8>,
}

impl Ace {
    pub fn allowed(sid: Sid, mask: u32, flags: u8) -> Self {
        Self {
            ace_type: AceType::ACCESS_ALLOWED,
            flags,
            mask,
            sid,
            object: None,
            application_data: Vec::new(),
        }
    }

    pub fn denied(sid: Sid, mask: u32, flags: u8) -> Self {
        Self {
            ace_type: AceType::ACCESS_DENIED,
            ..Self::allowed(sid, mask, flags)
        }
    }

    /// AceSize: header, mask, object fields, SID, application data, padded to 4 bytes.
    pub fn encoded_len(&self) -> usize {
        let object = self.object.as_ref().map_or(0, |o| {
            4 + 16
                * (usize::from(o.object_type.is_some())
                    + usize::from(o.inherited_object_type.is_some()))
        });
        (8 + object + self.sid.encoded_len() + self.application_data.len()).next_multiple_of(4)
    }

    pub fn encode(&self, w: &mut Writer) {
        let start = w.len();
        let size = len16(self.encoded_len());
        w.u8(self.ace_type.0)
            .u8(self.flags)
            .u16(size)
            .u32(self.mask);
        if let Some(o) = &self.object {
            let mut flags = 0;
            if o.object_type.is_some() {
                flags |= ACE_OBJECT_TYPE_PRESENT;
            }
            if o.inherited_object_type.is_some() {
                flags |= ACE_INHERITED_OBJECT_TYPE_PRESENT;
            }
            w.u32(flags);
            if let Some(g) = &o.object_type {
                w.bytes(g);
            }
            if let Some(g) = &o.inherited_object_type {
                w.bytes(g);
            }
        }
        self.sid.encode(w);
        w.bytes(&self.application_data);
        let written = w.len() - start;
        w.zeros(self.encoded_len().saturating_sub(written));
    }

    /// Decodes one ACE from the start of `buf` (the rest of its ACL). Returns the ACE and its
    /// AceSize. ACCESS_ALLOWED_COMPOUND and unknown types are rejected: their layout is unknown.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let ace_type = AceType(r.u8()?);
        let flags = r.u8()?;
        let size = usize::from(r.u16()?);
        // MS-DTYP 2.4.4.1: AceSize MUST be a multiple of 4.
        if size < 8 || !size.is_multiple_of(4) {
            return Err(DecodeError::InvalidField { field: "AceSize" });
        }
        let body = buf.get(..size).ok_or(DecodeError::Truncated {
            need: size,
            have: buf.len(),
        })?;
        let mut r = Reader::at(body, 4)?;
        let mask = r.u32()?;
        let object = if ace_type.is_object() {
            let oflags = r.u32()?;
            let object_type = if oflags & ACE_OBJECT_TYPE_PRESENT != 0 {
                Some(r.guid()?)
            } else {
                None
            };
            let inherited_object_type = if oflags & ACE_INHERITED_OBJECT_TYPE_PRESENT != 0 {
                Some(r.guid()?)
            } else {
                None
            };
            Some(ObjectAceData {
                object_type,
                inherited_object_type,
            })
        } else if ace_type.is_mask_sid() {
            None
        } else {
            return Err(DecodeError::InvalidField { field: "AceType" });
        };
        let sid = Sid::read(&mut r)?;
        let application_data = r.rest().to_vec();
        Ok((
            Self {
                ace_type,
                flags,
                mask,
                sid,
                object,
                application_data,
            },
            size,
        ))
    }
}

/// An access control list (MS-DTYP 2.4.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    pub revision: u8,
    pub aces: Vec<Ace>,
}

impl Default for Acl {
    fn default() -> Self {
        Self {
            revision: ACL_REVISION,
            aces: Vec::new(),
        }
    }
}

impl Acl {
    pub fn new(aces: Vec<Ace>) -> Self {
        Self {
            revision: ACL_REVISION,
            aces,
        }
    }

    pub fn encoded_len(&self) -> usize {
        ACL_HEADER_LEN + self.aces.iter().map(Ace::encoded_len).sum::<usize>()
    }

    /// Whether AclSize, AceCount and each AceSize fit their 16-bit fields.
    pub fn is_encodable(&self) -> bool {
        self.encoded_len() <= usize::from(u16::MAX)
            && self.aces.len() <= usize::from(u16::MAX)
            && self.aces.iter().all(|a| a.sid.is_valid())
    }

    /// Writes the ACL. The revision is raised to ACL_REVISION_DS when an object ACE is present
    /// (MS-DTYP 2.4.5). Oversized ACLs are the caller's bug: check [`Acl::is_encodable`].
    pub fn encode(&self, w: &mut Writer) {
        let revision = if self.aces.iter().any(|a| a.object.is_some()) {
            ACL_REVISION_DS
        } else {
            self.revision
        };
        let size = len16(self.encoded_len());
        let count = len16(self.aces.len());
        w.u8(revision).u8(0).u16(size).u16(count).u16(0);
        for a in &self.aces {
            a.encode(w);
        }
    }

    /// Decodes an ACL from the start of `buf`: AclSize must fit in `buf`, every ACE must fit in
    /// AclSize, and AceCount is capped at [`MAX_ACES`].
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let revision = r.u8()?;
        if revision != ACL_REVISION && revision != ACL_REVISION_DS {
            return Err(DecodeError::InvalidField {
                field: "AclRevision",
            });
        }
        r.skip(1)?;
        let size = usize::from(r.u16()?);
        let count = usize::from(r.u16()?);
        if size < ACL_HEADER_LEN {
            return Err(DecodeError::InvalidField { field: "AclSize" });
        }
        if count > MAX_ACES {
            return Err(DecodeError::TooLong {
                field: "AceCount",
                len: count,
                limit: MAX_ACES,
            });
        }
        let body = buf
            .get(ACL_HEADER_LEN..size)
            .ok_or(DecodeError::Truncated {
                need: size,
                have: buf.len(),
            })?;
        let mut aces = Vec::with_capacity(count.min(body.len() / 16));
        let mut pos = 0usize;
        for _ in 0..count {
            let (ace, len) = Ace::decode(body.get(pos..).unwrap_or_default())?;
            aces.push(ace);
            pos += len;
        }
        Ok(Self { revision, aces })
    }
}

/// A security descriptor. Encoded and decoded in self-relative form (MS-DTYP 2.4.6).
///
/// `control` keeps the bits as sent; the encoder forces SE_SELF_RELATIVE and sets
/// SE_DACL_PRESENT / SE_SACL_PRESENT for the ACLs that are `Some`. SE_DACL_PRESENT with
/// `dacl: None` is a NULL DACL (no protection), which therefore round-trips.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityDescriptor {
    pub control: u16,
    pub owner: Option<Sid>,
    pub group: Option<Sid>,
    pub sacl: Option<Acl>,
    pub dacl: Option<Acl>,
}

impl SecurityDescriptor {
    /// Smallest buffer a SET_INFO security descriptor can be.
    pub const MIN_LEN: usize = SD_HEADER_LEN;

    /// Whether every part fits its wire fields (see [`Acl::is_encodable`], [`Sid::is_valid`]).
    pub fn is_encodable(&self) -> bool {
        self.owner.as_ref().is_none_or(Sid::is_valid)
            && self.group.as_ref().is_none_or(Sid::is_valid)
            && self.sacl.as_ref().is_none_or(Acl::is_encodable)
            && self.dacl.as_ref().is_none_or(Acl::is_encodable)
    }

    /// Self-relative encoding of the whole descriptor. Order: header, owner, group, SACL, DACL;
    /// offsets count from the descriptor's first byte.
    pub fn encode(&self, w: &mut Writer) {
        self.encode_selected(u32::MAX, w);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.into_vec()
    }

    /// Encodes only the parts `additional_information` asks for (OWNER 1, GROUP 2, DACL 4,
    /// SACL 8; MS-SMB2 3.3.5.20.3); unrequested parts get offset 0 and their PRESENT bit cleared.
    pub fn encode_selected(&self, additional_information: u32, w: &mut Writer) {
        let want = |bit: u32| additional_information & bit != 0;
        let owner = self
            .owner
            .as_ref()
            .filter(|_| want(info::OWNER_SECURITY_INFORMATION));
        let group = self
            .group
            .as_ref()
            .filter(|_| want(info::GROUP_SECURITY_INFORMATION));
        let sacl_wanted = want(info::SACL_SECURITY_INFORMATION);
        let dacl_wanted = want(info::DACL_SECURITY_INFORMATION);
        let sacl = self.sacl.as_ref().filter(|_| sacl_wanted);
        let dacl = self.dacl.as_ref().filter(|_| dacl_wanted);

        let mut ctl = self.control | control::SE_SELF_RELATIVE;
        if !sacl_wanted {
            ctl &= !(control::SE_SACL_PRESENT
                | control::SE_SACL_DEFAULTED
                | control::SE_SACL_AUTO_INHERITED
                | control::SE_SACL_PROTECTED);
        } else if sacl.is_some() {
            ctl |= control::SE_SACL_PRESENT;
        }
        if !dacl_wanted {
            ctl &= !(control::SE_DACL_PRESENT
                | control::SE_DACL_DEFAULTED
                | control::SE_DACL_AUTO_INHERITED
                | control::SE_DACL_PROTECTED);
        } else if dacl.is_some() {
            ctl |= control::SE_DACL_PRESENT;
        }
        if owner.is_none() {
            ctl &= !control::SE_OWNER_DEFAULTED;
        }
        if group.is_none() {
            ctl &= !control::SE_GROUP_DEFAULTED;
        }

        let base = w.len();
        w.u8(1).u8(0).u16(ctl);
        let offsets_at = w.len();
        w.zeros(16);
        let rel = |w: &Writer| len32(w.len() - base);
        if let Some(s) = owner {
            w.patch_u32(offsets_at, rel(w));
            s.encode(w);
        }
        if let Some(s) = group {
            w.patch_u32(offsets_at + 4, rel(w));
            s.encode(w);
        }
        if let Some(a) = sacl {
            w.patch_u32(offsets_at + 8, rel(w));
            a.encode(w);
        }
        if let Some(a) = dacl {
            w.patch_u32(offsets_at + 12, rel(w));
            a.encode(w);
        }
    }

    /// Decodes a self-relative descriptor. Every offset must land inside `buf` past the header;
    /// a descriptor without SE_SELF_RELATIVE is rejected (absolute form has pointers, not
    /// offsets, and never travels on the wire).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        if r.u8()? != 1 {
            return Err(DecodeError::InvalidField {
                field: "SecurityDescriptor.Revision",
            });
        }
        r.skip(1)?;
        let control = r.u16()?;
        if control & control::SE_SELF_RELATIVE == 0 {
            return Err(DecodeError::InvalidField {
                field: "SecurityDescriptor.Control",
            });
        }
        let owner_off = to_usize(r.u32()?);
        let group_off = to_usize(r.u32()?);
        let sacl_off = to_usize(r.u32()?);
        let dacl_off = to_usize(r.u32()?);
        let part = |off: usize| -> Result<Option<&[u8]>, DecodeError> {
            if off == 0 {
                return Ok(None);
            }
            if off < SD_HEADER_LEN || off >= buf.len() {
                return Err(DecodeError::BadOffset {
                    offset: off,
                    len: 1,
                    total: buf.len(),
                });
            }
            Ok(buf.get(off..))
        };
        let owner = part(owner_off)?.map(Sid::decode).transpose()?;
        let group = part(group_off)?.map(Sid::decode).transpose()?;
        let sacl = if control & control::SE_SACL_PRESENT != 0 {
            part(sacl_off)?.map(Acl::decode).transpose()?
        } else {
            None
        };
        let dacl = if control & control::SE_DACL_PRESENT != 0 {
            part(dacl_off)?.map(Acl::decode).transpose()?
        } else {
            None
        };
        Ok(Self {
            control,
            owner,
            group,
            sacl,
            dacl,
        })
    }

    /// The descriptor a POSIX file presents: owner S-1-22-1-`uid`, group S-1-22-2-`gid`, and a
    /// DACL allowing owner, group and Everyone what their rwx bits give. r maps to
    /// FILE_GENERIC_READ, w to FILE_GENERIC_WRITE (plus FILE_DELETE_CHILD on directories), x to
    /// FILE_GENERIC_EXECUTE. The owner also holds what POSIX lets an owner do regardless of
    /// mode: read/change the ACL (chmod), take ownership, delete, and read/write attributes.
    /// Classes with no bits get no ACE.
    pub fn from_posix(uid: u32, gid: u32, mode: u32, is_dir: bool) -> Self {
        let rights = |bits: u32| {
            let mut m = 0;
            if bits & 4 != 0 {
                m |= FILE_GENERIC_READ;
            }
            if bits & 2 != 0 {
                m |= FILE_GENERIC_WRITE;
                if is_dir {
                    m |= FILE_DELETE_CHILD;
                }
            }
            if bits & 1 != 0 {
                m |= FILE_GENERIC_EXECUTE;
            }
            m
        };
        let owner_extra = READ_CONTROL
            | WRITE_DAC
            | WRITE_OWNER
            | DELETE
            | FILE_READ_ATTRIBUTES
            | FILE_WRITE_ATTRIBUTES
            | SYNCHRONIZE;
        let owner = Sid::unix_user(uid);
        let group = Sid::unix_group(gid);
        let mut aces = vec![Ace::allowed(
            owner.clone(),
            rights(mode >> 6) | owner_extra,
            0,
        )];
        let g = rights(mode >> 3);
        if g != 0 {
            aces.push(Ace::allowed(group.clone(), g, 0));
        }
        let o = rights(mode);
        if o != 0 {
            aces.push(Ace::allowed(Sid::everyone(), o, 0));
        }
        Self {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(owner),
            group: Some(group),
            sacl: None,
            dacl: Some(Acl::new(aces)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::fscc::access::{FILE_ALL_ACCESS, FILE_EXECUTE, FILE_WRITE_DATA};

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn builtin_administrators_bytes_and_string() {
        // MS-DTYP 2.4.2.2 layout worked by hand: revision 1, two sub-authorities, authority 5
        // (48-bit big-endian), then 32 and 544 (0x220) little-endian.
        let expect = hex::decode("01020000000000052000000020020000").unwrap();
        let sid = Sid::builtin_administrators();
        assert_eq!(sid.to_bytes(), expect);
        assert_eq!(sid.to_string(), "S-1-5-32-544");
        assert_eq!("S-1-5-32-544".parse::<Sid>().unwrap(), sid);
        assert_eq!(Sid::decode(&expect).unwrap(), sid);
    }

    #[test]
    fn well_known_strings() {
        assert_eq!(Sid::everyone().to_string(), "S-1-1-0");
        assert_eq!(Sid::local_system().to_string(), "S-1-5-18");
        assert_eq!(Sid::unix_user(1000).to_string(), "S-1-22-1-1000");
        assert_eq!(Sid::unix_group(100).to_string(), "S-1-22-2-100");
        assert_eq!(Sid::unix_user(1000).as_unix_user(), Some(1000));
        assert_eq!(Sid::unix_user(1000).as_unix_group(), None);
        assert_eq!(Sid::unix_group(7).as_unix_group(), Some(7));
        assert_eq!(Sid::everyone().as_unix_user(), None);
    }

    #[test]
    fn string_round_trip_and_rejects() {
        for s in [
            "S-1-5-21-1004336348-1177238915-682003330-512",
            "S-1-0x0100DEADBEEF-1",
            "S-1-5",
        ] {
            let sid: Sid = s.parse().unwrap();
            assert_eq!(sid.to_string(), s);
            assert_eq!(Sid::decode(&sid.to_bytes()).unwrap(), sid);
        }
        // Authorities below 2^32 print in decimal whichever way they were written.
        assert_eq!(
            "S-1-0x0000DEADBEEF-1".parse::<Sid>().unwrap().to_string(),
            "S-1-3735928559-1"
        );
        assert_eq!(
            Sid::new(0x0100_DEAD_BEEF, &[1]).authority_value(),
            0x0100_DEAD_BEEF
        );
        for bad in [
            "",
            "S",
            "X-1-5",
            "S-1-x",
            "S-1-5-",
            "S-1-281474976710656",
            "S-1-5-4294967296",
        ] {
            assert!(bad.parse::<Sid>().is_err(), "{bad}");
        }
        let sixteen = format!("S-1-5{}", "-1".repeat(16));
        assert!(sixteen.parse::<Sid>().is_err());
    }

    #[test]
    fn sid_decode_bounds() {
        let b = Sid::builtin_administrators().to_bytes();
        assert!(Sid::decode(&b[..15]).is_err());
        let mut many = b.clone();
        many[1] = 16;
        assert!(matches!(
            Sid::decode(&many),
            Err(DecodeError::TooLong { .. })
        ));
        let mut rev = b;
        rev[0] = 2;
        assert!(Sid::decode(&rev).is_err());
    }

    fn sample() -> SecurityDescriptor {
        let object_ace = Ace {
            ace_type: AceType::ACCESS_ALLOWED_OBJECT,
            flags: 0,
            mask: 0x100,
            sid: Sid::authenticated_users(),
            object: Some(ObjectAceData {
                object_type: Some([7; 16]),
                inherited_object_type: None,
            }),
            application_data: Vec::new(),
        };
        let callback = Ace {
            ace_type: AceType::ACCESS_ALLOWED_CALLBACK,
            application_data: vec![1, 2, 3, 4, 5, 6, 7, 8],
            ..Ace::allowed(Sid::builtin_users(), FILE_GENERIC_READ, 0)
        };
        SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PROTECTED,
            owner: Some(Sid::unix_user(1000)),
            group: Some(Sid::unix_group(1000)),
            sacl: Some(Acl::new(vec![Ace {
                ace_type: AceType::SYSTEM_AUDIT,
                ..Ace::allowed(Sid::everyone(), DELETE, ace_flags::FAILED_ACCESS_ACE_FLAG)
            }])),
            dacl: Some(Acl::new(vec![
                Ace::denied(Sid::everyone(), FILE_WRITE_DATA, 0),
                Ace::allowed(Sid::builtin_administrators(), FILE_ALL_ACCESS, 3),
                object_ace,
                callback,
            ])),
        }
    }

    #[test]
    fn descriptor_round_trip_and_layout() {
        let sd = sample();
        assert!(sd.is_encodable());
        let b = sd.to_bytes();
        assert_eq!(b[0], 1);
        let ctl = u16::from_le_bytes([b[2], b[3]]);
        assert_eq!(
            ctl,
            control::SE_SELF_RELATIVE
                | control::SE_DACL_PROTECTED
                | control::SE_DACL_PRESENT
                | control::SE_SACL_PRESENT
        );
        // Owner right after the 20-byte header, group after the 16-byte owner SID.
        assert_eq!(u32_at(&b, 4), 20);
        assert_eq!(u32_at(&b, 8), 36);
        assert_eq!(u32_at(&b, 12), 52);
        let dacl_off = u32_at(&b, 16) as usize;
        assert_eq!(
            b[dacl_off], ACL_REVISION_DS,
            "object ACE forces the DS revision"
        );
        assert_eq!(
            u16::from_le_bytes([b[dacl_off + 2], b[dacl_off + 3]]) as usize,
            b.len() - dacl_off
        );
        assert_eq!(u16::from_le_bytes([b[dacl_off + 4], b[dacl_off + 5]]), 4);

        let mut d = SecurityDescriptor::decode(&b).unwrap();
        d.control = sd.control | control::SE_DACL_PRESENT | control::SE_SACL_PRESENT;
        if let Some(dacl) = d.dacl.as_mut() {
            dacl.revision = ACL_REVISION;
        }
        let mut want = sd.clone();
        want.control = d.control;
        assert_eq!(d, want);
        // And decoding what we encode is a fixed point.
        assert_eq!(
            SecurityDescriptor::decode(&d.to_bytes())
                .unwrap()
                .to_bytes(),
            d.to_bytes()
        );
    }

    #[test]
    fn ace_layout() {
        let ace = Ace::allowed(Sid::everyone(), 0x0012_0089, ace_flags::OBJECT_INHERIT_ACE);
        let mut w = Writer::new();
        ace.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 20);
        assert_eq!(&b[..4], &[0, 1, 20, 0]);
        assert_eq!(u32_at(&b, 4), 0x0012_0089);
        assert_eq!(&b[8..], &Sid::everyone().to_bytes()[..]);
        let (d, n) = Ace::decode(&b).unwrap();
        assert_eq!((d, n), (ace, 20));
    }

    #[test]
    fn selected_parts_only() {
        let sd = sample();
        let mut w = Writer::new();
        sd.encode_selected(info::OWNER_SECURITY_INFORMATION, &mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 20 + 16);
        assert_eq!(
            (u32_at(&b, 4), u32_at(&b, 8), u32_at(&b, 12), u32_at(&b, 16)),
            (20, 0, 0, 0)
        );
        let ctl = u16::from_le_bytes([b[2], b[3]]);
        assert_eq!(
            ctl & (control::SE_DACL_PRESENT | control::SE_SACL_PRESENT),
            0
        );
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert_eq!(d.owner, sd.owner);
        assert!(d.group.is_none() && d.dacl.is_none() && d.sacl.is_none());

        let mut w = Writer::new();
        sd.encode_selected(
            info::DACL_SECURITY_INFORMATION | info::GROUP_SECURITY_INFORMATION,
            &mut w,
        );
        let d = SecurityDescriptor::decode(w.as_slice()).unwrap();
        assert!(d.owner.is_none() && d.sacl.is_none());
        assert_eq!(d.group, sd.group);
        assert_eq!(d.dacl.unwrap().aces, sd.dacl.unwrap().aces);
    }

    #[test]
    fn null_dacl_round_trips() {
        let sd = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            ..Default::default()
        };
        let b = sd.to_bytes();
        assert_eq!(u32_at(&b, 16), 0);
        assert_eq!(SecurityDescriptor::decode(&b).unwrap(), sd);
    }

    #[test]
    fn decode_rejects_hostile_descriptors() {
        let good = sample().to_bytes();
        assert!(SecurityDescriptor::decode(&good[..19]).is_err());
        let mut b = good.clone();
        b[4..8].copy_from_slice(&(good.len() as u32).to_le_bytes());
        assert!(
            SecurityDescriptor::decode(&b).is_err(),
            "owner offset at the end"
        );
        let mut b = good.clone();
        b[4..8].copy_from_slice(&4u32.to_le_bytes());
        assert!(
            SecurityDescriptor::decode(&b).is_err(),
            "owner offset inside the header"
        );
        let mut b = good.clone();
        b[3] &= 0x7F;
        assert!(SecurityDescriptor::decode(&b).is_err(), "absolute form");
        let dacl = u32_at(&good, 16) as usize;
        let mut b = good.clone();
        b[dacl + 2..dacl + 4].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(
            SecurityDescriptor::decode(&b).is_err(),
            "AclSize past the buffer"
        );
        let mut b = good.clone();
        b[dacl + 4..dacl + 6].copy_from_slice(&5u16.to_le_bytes());
        assert!(
            SecurityDescriptor::decode(&b).is_err(),
            "AceCount past AclSize"
        );
        let mut b = good.clone();
        b[dacl + 4..dacl + 6].copy_from_slice(&2000u16.to_le_bytes());
        assert!(matches!(
            SecurityDescriptor::decode(&b),
            Err(DecodeError::TooLong { .. })
        ));
        let mut b = good.clone();
        b[dacl + 8 + 2..dacl + 8 + 4].copy_from_slice(&4u16.to_le_bytes());
        assert!(
            SecurityDescriptor::decode(&b).is_err(),
            "AceSize smaller than an ACE"
        );
        let mut b = good;
        b[dacl + 8] = 0x04;
        assert!(SecurityDescriptor::decode(&b).is_err(), "compound ACE");
        // No input panics: every truncation of a valid descriptor decodes or errors.
        let good = sample().to_bytes();
        for n in 0..good.len() {
            let _ = SecurityDescriptor::decode(&good[..n]);
        }
    }

    #[test]
    fn posix_mapping() {
        let sd = SecurityDescriptor::from_posix(1000, 100, 0o750, false);
        assert_eq!(sd.owner, Some(Sid::unix_user(1000)));
        assert_eq!(sd.group, Some(Sid::unix_group(100)));
        let aces = &sd.dacl.as_ref().unwrap().aces;
        assert_eq!(aces.len(), 2, "no ACE for Everyone with mode o=0");
        let owner = aces[0].mask;
        assert_eq!(owner & FILE_GENERIC_READ, FILE_GENERIC_READ);
        assert_eq!(owner & FILE_GENERIC_WRITE, FILE_GENERIC_WRITE);
        assert_eq!(owner & FILE_EXECUTE, FILE_EXECUTE);
        assert_eq!(
            owner & (WRITE_DAC | WRITE_OWNER | DELETE),
            WRITE_DAC | WRITE_OWNER | DELETE
        );
        assert_eq!(aces[1].mask, FILE_GENERIC_READ | FILE_GENERIC_EXECUTE);
        assert_eq!(aces[1].sid, Sid::unix_group(100));
        assert_eq!(aces[0].mask & FILE_DELETE_CHILD, 0);

        let d = SecurityDescriptor::from_posix(0, 0, 0o777, true);
        let aces = &d.dacl.as_ref().unwrap().aces;
        assert_eq!(aces.len(), 3);
        assert_eq!(aces[2].sid, Sid::everyone());
        assert_ne!(aces[2].mask & FILE_DELETE_CHILD, 0);

        let ro = SecurityDescriptor::from_posix(1, 1, 0o400, false);
        let m = ro.dacl.as_ref().unwrap().aces[0].mask;
        assert_eq!(m & FILE_WRITE_DATA, 0);
        assert_eq!(SecurityDescriptor::decode(&ro.to_bytes()).unwrap(), ro);
    }

    /// Found by the `fscc` fuzz target: an AceSize of 0x11 decoded, then re-encoded differently.
    #[test]
    fn ace_size_not_multiple_of_four_is_rejected() {
        let sd = hex::decode(
            "0100048000000000000000000000000014000000020019000100000000001100ff011f00010000000000000100",
        )
        .unwrap();
        assert!(SecurityDescriptor::decode(&sd).is_err());
    }
}
