//! QUERY_INFO (MS-SMB2 3.3.5.20): file, filesystem and security information.
//!
//! Buffer rules, as smbtorture smb2.getinfo.{qfile,qfs,qsec}_buffercheck expect from Windows:
//! an OutputBufferLength below the class's fixed size is INFO_LENGTH_MISMATCH; one that holds
//! the fixed part but not the whole answer gets the truncated data with BUFFER_OVERFLOW;
//! security descriptors that do not fit give BUFFER_TOO_SMALL with the needed size.

use std::sync::atomic::Ordering;

use smbq_proto::Response;
use smbq_vfs::{FileKind, FsStat, RelPath, Stat};
use smbq_wire::error_response::ErrorResponse;
use smbq_wire::fscc::file_info::{
    AccessInfo, AlignmentInfo, AllInfo, AttributeTagInfo, BasicInfo, CompressionInfo, EaInfo,
    InternalInfo, ModeInfo, NameInfo, NetworkOpenInfo, PositionInfo, StandardInfo, StreamEntry,
    StreamInfo,
};
use smbq_wire::fscc::fs_info::{
    self, AttributeInfo, DeviceInfo, FullSizeInfo, ObjectIdInfo, SectorSizeInfo, SizeInfo,
    VolumeInfo,
};
use smbq_wire::fscc::{FileInfoClass, FsInfoClass};
use smbq_wire::posix::{self, FsPosixInfo, PosixInfo};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::{Dialect, NtStatus, Writer};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;
use crate::dos::{self, View};
use crate::errors::map_io_error;
use crate::meta;
use crate::open_state::Queries as _;
use crate::tables::Open;

/// Windows checks the buffer against `sizeof(FILE_NAME_INFORMATION)`, which C pads from 6
/// to 8 bytes (smb2.getinfo.qfile_buffercheck: 7 bytes is INFO_LENGTH_MISMATCH).
const NAME_INFO_FIXED: usize = 8;

/// An encoded answer and the size below which a buffer is INFO_LENGTH_MISMATCH.
struct Answer {
    data: Vec<u8>,
    fixed: usize,
}

fn enc(fixed: usize, f: impl FnOnce(&mut Writer)) -> Answer {
    let mut w = Writer::new();
    f(&mut w);
    Answer {
        data: w.into_vec(),
        fixed,
    }
}

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = QueryInfoRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    let max = req.output_buffer_length as usize;
    if req.output_buffer_length > ctx.conn.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let class = req.file_info_class;
    let addl = req.additional_information;
    let dialect = ctx.conn.dialect;
    let srv = ctx.srv.self_arc();
    if req.info_type == InfoType::FILE && FileInfoClass(class) == FileInfoClass::FULL_EA {
        let (open, input, flags) = (open.clone(), req.input.to_vec(), req.flags);
        let q = blocking(move || full_ea(&open, &input, flags, max)).await?;
        return Ok(Response::with_status(
            q.status,
            body(|w| QueryInfoResponse { buffer: &q.data }.encode(w)),
        ));
    }
    let answer = match req.info_type {
        InfoType::FILE => {
            blocking(move || file_info(&srv, &open, FileInfoClass(class), dialect)).await?
        }
        InfoType::FILESYSTEM => blocking(move || fs_info(&open, FsInfoClass(class))).await?,
        InfoType::SECURITY => {
            // MS-SMB2 3.3.5.20.3 / MS-FSA 2.1.5.12: only the parts asked for need access.
            let need = crate::security::query_needs(addl);
            if open.granted & need != need {
                return Err(NtStatus::ACCESS_DENIED);
            }
            let sd = blocking(move || security(&open, addl)).await?;
            if sd.len() > max {
                // 3.3.5.20.3: the ErrorData carries the size the client should ask for.
                let need = u32::try_from(sd.len()).unwrap_or(u32::MAX).to_le_bytes();
                let err = ErrorResponse {
                    error_context_count: 0,
                    error_data: &need,
                };
                return Ok(Response {
                    status: NtStatus::BUFFER_TOO_SMALL,
                    body: body(|w| err.encode(w)),
                    ..Default::default()
                });
            }
            Answer { data: sd, fixed: 0 }
        }
        InfoType::QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    if max < answer.fixed && max < answer.data.len() {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let (status, data) = if answer.data.len() > max {
        (
            NtStatus::BUFFER_OVERFLOW,
            answer.data.get(..max).unwrap_or_default(),
        )
    } else {
        (NtStatus::SUCCESS, answer.data.as_slice())
    };
    Ok(Response::with_status(
        status,
        body(|w| QueryInfoResponse { buffer: data }.encode(w)),
    ))
}

fn stat_of(open: &Open) -> Result<Stat, NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    f.file.stat().map_err(|e| map_io_error(&e))
}

fn basic(v: &View) -> BasicInfo {
    BasicInfo {
        creation_time: v.creation,
        last_access_time: v.last_access,
        last_write_time: v.last_write,
        change_time: v.change,
        file_attributes: v.attributes,
    }
}

/// NumberOfLinks as Windows reports it: a name pending deletion no longer counts
/// (smb2.setinfo: delete pending gives 0 links for a file with one name).
fn links(nlink: u64, delete_pending: bool) -> u32 {
    let n = if delete_pending {
        nlink.saturating_sub(1)
    } else {
        nlink
    };
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The path as Windows reports it in FileNameInformation: from the share root, `\`-separated,
/// with a leading `\`.
fn windows_path(open: &Open) -> String {
    let p = open.path();
    format!("\\{}{}", p.as_str().replace('/', "\\"), stream_suffix(open))
}

/// `:name` for an open of a named stream: Windows names the stream in FileNameInformation
/// and FileNormalizedNameInformation (smbtorture smb2.getinfo.normalized).
fn stream_suffix(open: &Open) -> String {
    open.file()
        .and_then(|f| f.stream.as_ref())
        .and_then(|s| s.name())
        .map(|n| format!(":{n}"))
        .unwrap_or_default()
}

/// What the file information classes are built from: one stat and one DOS view per query,
/// so FileAllInformation and its parts visibly agree.
struct FileFacts<'a> {
    srv: &'a crate::Server,
    open: &'a Open,
    f: &'a crate::tables::open::FileOpen,
    st: Stat,
    v: View,
    delete_pending: bool,
}

impl FileFacts<'_> {
    fn standard(&self) -> StandardInfo {
        StandardInfo {
            allocation_size: meta::allocation_with(
                &self.st,
                self.srv.open_state().allocation(self.f.key),
            ),
            end_of_file: meta::end_of_file(&self.st),
            number_of_links: links(self.st.nlink, self.delete_pending),
            delete_pending: self.delete_pending,
            directory: self.st.kind == FileKind::Dir,
        }
    }

    fn internal(&self) -> InternalInfo {
        InternalInfo {
            index_number: self.v.file_id,
        }
    }

    fn ea(&self) -> EaInfo {
        EaInfo {
            ea_size: crate::ea::ea_size(self.f.file.as_ref()),
        }
    }

    fn access(&self) -> AccessInfo {
        AccessInfo {
            access_flags: self.open.granted,
        }
    }

    fn position(&self) -> PositionInfo {
        PositionInfo {
            current_byte_offset: self.open.position.load(Ordering::Relaxed),
        }
    }

    fn mode(&self) -> ModeInfo {
        ModeInfo {
            mode: self.open.mode.load(Ordering::Relaxed),
        }
    }

    /// FileAllInformation: the parts above, in MS-FSCC 2.4.2's order, and the name.
    fn all(&self) -> AllInfo {
        AllInfo {
            basic: basic(&self.v),
            standard: self.standard(),
            internal: self.internal(),
            ea: self.ea(),
            access: self.access(),
            position: self.position(),
            mode: self.mode(),
            alignment: AlignmentInfo::default(),
            name: NameInfo {
                file_name: windows_path(self.open),
            },
        }
    }

    fn network_open(&self) -> NetworkOpenInfo {
        let v = &self.v;
        NetworkOpenInfo {
            creation_time: v.creation,
            last_access_time: v.last_access,
            last_write_time: v.last_write,
            change_time: v.change,
            allocation_size: meta::allocation_with(
                &self.st,
                self.srv.open_state().allocation(self.f.key),
            ),
            end_of_file: meta::end_of_file(&self.st),
            file_attributes: v.attributes,
        }
    }
}

/// One arm per MS-FSCC 2.4 information class, each encoding its structure from the same
/// `FileFacts`.
fn file_info(
    srv: &crate::Server,
    open: &Open,
    class: FileInfoClass,
    dialect: Dialect,
) -> Result<Answer, NtStatus> {
    let need = file_class_needs(class);
    if open.granted & need != need {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.pipe().is_some() {
        return pipe_info(class);
    }
    let st = stat_of(open)?;
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    let path = open.path();
    let name = path.file_name().unwrap_or_default();
    let v = dos::view(srv, f.file.as_ref(), f.key, &st, name);
    let delete_pending = srv.open_state().delete_pending(f.key);
    let x = FileFacts {
        srv,
        open,
        f,
        st,
        v,
        delete_pending,
    };
    Ok(match class {
        FileInfoClass::BASIC => enc(BasicInfo::LEN, |w| basic(&x.v).encode(w)),
        FileInfoClass::STANDARD => enc(StandardInfo::LEN, |w| x.standard().encode(w)),
        FileInfoClass::INTERNAL => enc(InternalInfo::LEN, |w| x.internal().encode(w)),
        FileInfoClass::EA => enc(EaInfo::LEN, |w| x.ea().encode(w)),
        FileInfoClass::ACCESS => enc(AccessInfo::LEN, |w| x.access().encode(w)),
        FileInfoClass::POSITION => enc(PositionInfo::LEN, |w| x.position().encode(w)),
        FileInfoClass::MODE => enc(ModeInfo::LEN, |w| x.mode().encode(w)),
        FileInfoClass::ALIGNMENT => enc(AlignmentInfo::LEN, |w| AlignmentInfo::default().encode(w)),
        // Windows counts 104 bytes as the fixed part (smb2.getinfo.qfile_buffercheck).
        FileInfoClass::ALL => enc(AllInfo::FIXED_LEN + 4, |w| x.all().encode(w)),
        FileInfoClass::NETWORK_OPEN => enc(NetworkOpenInfo::LEN, |w| x.network_open().encode(w)),
        FileInfoClass::ATTRIBUTE_TAG => enc(AttributeTagInfo::LEN, |w| {
            AttributeTagInfo {
                file_attributes: x.v.attributes,
                reparse_tag: x.v.reparse_tag,
            }
            .encode(w)
        }),
        FileInfoClass::STREAM => {
            let list = stream_list(open, f, &x.st)?;
            enc(32, |w| StreamInfo::encode(&list, w))
        }
        FileInfoClass::COMPRESSION => enc(CompressionInfo::LEN, |w| {
            CompressionInfo {
                compressed_file_size: meta::end_of_file(&x.st),
                ..Default::default()
            }
            .encode(w)
        }),
        FileInfoClass::NORMALIZED_NAME => normalized_name(open, &path, dialect)?,
        // FILE_ID_INFORMATION (MS-FSCC 2.4.26): VolumeSerialNumber(8) and a 128-bit FileId.
        FileInfoClass::ID => enc(24, |w| {
            w.u64(u64::from(open.tree.share.serial))
                .u64(x.v.file_id)
                .u64(0);
        }),
        FileInfoClass::ALTERNATE_NAME => alternate_name(&path)?,
        FileInfoClass::FULL_EA => return Err(NtStatus::NO_EAS_ON_FILE),
        // FILE_POSIX_INFORMATION, on POSIX opens only (crate::posix; INVALID_LEVEL elsewhere,
        // as Samba answers).
        FileInfoClass(posix::INFO_CLASS) if !open.posix => return Err(NtStatus::INVALID_LEVEL),
        FileInfoClass(posix::INFO_CLASS) => {
            let allocation = x.network_open().allocation_size;
            let info = crate::posix::info(&x.st, &x.v, allocation);
            // (crate::posix::info reads the reparse tag from the view.)
            enc(PosixInfo::FIXED_LEN, |w| info.encode(w))
        }
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    })
}

/// FileNormalizedNameInformation: the path from the share root, without a leading `\`.
fn normalized_name(open: &Open, path: &RelPath, dialect: Dialect) -> Result<Answer, NtStatus> {
    // MS-SMB2 3.3.5.20.1: FileNormalizedNameInformation is a 3.1.1 class.
    if dialect != Dialect::SMB3_1_1 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    Ok(enc(NAME_INFO_FIXED, |w| {
        NameInfo {
            file_name: format!(
                "{}{}",
                path.as_str().replace('/', "\\"),
                stream_suffix(open)
            ),
        }
        .encode(w)
    }))
}

/// FileAlternateNameInformation: the 8.3 name of the leaf.
fn alternate_name(path: &RelPath) -> Result<Answer, NtStatus> {
    // The share root has no name of its own to shorten.
    if path.is_root() {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let leaf = path.file_name().unwrap_or_default();
    Ok(enc(NAME_INFO_FIXED, |w| {
        NameInfo {
            file_name: crate::short_name::short_name(leaf),
        }
        .encode(w)
    }))
}

/// Access a file information class needs from the open (MS-SMB2 3.3.5.20.1; MS-FSA 2.1.5.12.12
/// for FileFullEaInformation). FILE_POSIX_INFORMATION needs none, as in Samba (smb2_getinfo.c
/// checks only the classes MS-SMB2 names): a POSIX client's append-only handle may stat its
/// file (smb3unix test_append).
fn file_class_needs(class: FileInfoClass) -> u32 {
    match class {
        FileInfoClass::BASIC
        | FileInfoClass::ALL
        | FileInfoClass::NETWORK_OPEN
        | FileInfoClass::ATTRIBUTE_TAG => mask::FILE_READ_ATTRIBUTES,
        FileInfoClass::FULL_EA => mask::FILE_READ_EA,
        _ => 0,
    }
}

/// MS-FSCC 2.4.49 FileStreamInformation: `::$DATA` (files only, MS-FSCC 2.1.4: a directory
/// has no unnamed data stream) and every named stream as `:name:$DATA`, whichever stream
/// the open addresses.
fn stream_list(
    open: &Open,
    f: &crate::tables::open::FileOpen,
    st: &Stat,
) -> Result<Vec<StreamEntry>, NtStatus> {
    let base = match &f.stream {
        None => st.clone(),
        Some(_) => {
            let vfs = open
                .tree
                .share
                .vfs
                .as_ref()
                .ok_or(NtStatus::INTERNAL_ERROR)?;
            vfs.stat(&open.path()).map_err(|e| map_io_error(&e))?
        }
    };
    let mut out = Vec::new();
    if base.kind != FileKind::Dir {
        out.push(StreamEntry {
            name: StreamInfo::DEFAULT_DATA_STREAM.to_owned(),
            size: base.size,
            allocation_size: meta::allocation_size(&base),
        });
    }
    let named = crate::streams::list(f.file.as_ref()).map_err(|e| map_io_error(&e))?;
    for (name, size) in named {
        out.push(StreamEntry {
            name: format!(":{name}:$DATA"),
            size,
            allocation_size: size.div_ceil(4096).saturating_mul(4096),
        });
    }
    Ok(out)
}

/// QUERY_INFO FileFullEaInformation (MS-SMB2 3.3.5.20.1, `crate::ea::query`): whole entries
/// only, so it answers here rather than through the truncating path of the other classes.
fn full_ea(
    open: &Open,
    input: &[u8],
    flags: u32,
    max: usize,
) -> Result<crate::ea::Query, NtStatus> {
    if open.pipe().is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !open.has(mask::FILE_READ_EA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    let eas = crate::ea::list(f.file.as_ref()).map_err(|e| map_io_error(&e))?;
    let index = open.ea_index.load(Ordering::Relaxed);
    let q = crate::ea::query(&eas, input, flags, index, max)?;
    if input.is_empty() {
        open.ea_index.store(q.next_index, Ordering::Relaxed);
    }
    Ok(q)
}

/// The few classes a named pipe answers.
fn pipe_info(class: FileInfoClass) -> Result<Answer, NtStatus> {
    Ok(match class {
        FileInfoClass::BASIC => enc(BasicInfo::LEN, |w| {
            BasicInfo {
                file_attributes: crate::access::attr::NORMAL,
                ..Default::default()
            }
            .encode(w)
        }),
        FileInfoClass::STANDARD => enc(StandardInfo::LEN, |w| {
            StandardInfo {
                allocation_size: 4096,
                number_of_links: 1,
                delete_pending: true,
                ..Default::default()
            }
            .encode(w)
        }),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    })
}

/// One arm per MS-FSCC 2.5 file system information class.
fn fs_info(open: &Open, class: FsInfoClass) -> Result<Answer, NtStatus> {
    // FILE_FS_POSIX_INFORMATION is for POSIX opens (crate::posix).
    if class == FsInfoClass(posix::INFO_CLASS) && !open.posix {
        return Err(NtStatus::INVALID_INFO_CLASS);
    }
    let share = &open.tree.share;
    let vfs = share.vfs.as_ref().ok_or(NtStatus::INVALID_PARAMETER)?;
    let fs = vfs.statfs().map_err(|e| map_io_error(&e))?;
    let sector: u32 = 512;
    let spu = u32::try_from((fs.block_size / u64::from(sector)).max(1)).unwrap_or(8);
    Ok(match class {
        FsInfoClass::VOLUME => enc(24, |w| {
            VolumeInfo {
                volume_creation_time: 0,
                volume_serial_number: share.serial,
                supports_objects: false,
                volume_label: share.name().to_owned(),
            }
            .encode(w)
        }),
        FsInfoClass::SIZE => enc(SizeInfo::LEN, |w| {
            SizeInfo {
                total_allocation_units: fs.total_blocks,
                available_allocation_units: fs.avail_blocks,
                sectors_per_allocation_unit: spu,
                bytes_per_sector: sector,
            }
            .encode(w)
        }),
        FsInfoClass::FULL_SIZE => enc(FullSizeInfo::LEN, |w| {
            FullSizeInfo {
                total_allocation_units: fs.total_blocks,
                caller_available_allocation_units: fs.avail_blocks,
                actual_available_allocation_units: fs.free_blocks,
                sectors_per_allocation_unit: spu,
                bytes_per_sector: sector,
            }
            .encode(w)
        }),
        FsInfoClass::DEVICE => enc(DeviceInfo::LEN, |w| {
            DeviceInfo {
                device_type: fs_info::FILE_DEVICE_DISK,
                characteristics: fs_info::FILE_DEVICE_IS_MOUNTED,
            }
            .encode(w)
        }),
        FsInfoClass::ATTRIBUTE => enc(16, |w| attribute_info(&fs).encode(w)),
        // FILE_FS_CONTROL_INFORMATION (MS-FSCC 2.5.2): no quotas, default limits "none".
        FsInfoClass::CONTROL => enc(48, |w| {
            w.u64(0)
                .u64(0)
                .u64(0)
                .u64(u64::MAX)
                .u64(u64::MAX)
                .u32(0)
                .u32(0);
        }),
        FsInfoClass::OBJECT_ID => enc(ObjectIdInfo::LEN, |w| {
            object_id_info(share.serial).encode(w)
        }),
        FsInfoClass::SECTOR_SIZE => {
            enc(SectorSizeInfo::LEN, |w| sector_size_info(sector).encode(w))
        }
        FsInfoClass(posix::INFO_CLASS) => {
            enc(FsPosixInfo::LEN, |w| crate::posix::fs_info(&fs).encode(w))
        }
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    })
}

/// FileFsAttributeInformation (MS-FSCC 2.5.1): what the file system says it supports.
fn attribute_info(fs: &FsStat) -> AttributeInfo {
    AttributeInfo {
        // CASE_SENSITIVE_SEARCH says the file system can search by exact case (NTFS
        // and Samba set it); names are still matched case-insensitively here.
        file_system_attributes: fs_info::FILE_CASE_SENSITIVE_SEARCH
            | fs_info::FILE_CASE_PRESERVED_NAMES
            | fs_info::FILE_SUPPORTS_SPARSE_FILES
            | fs_info::FILE_UNICODE_ON_DISK
            | fs_info::FILE_PERSISTENT_ACLS
            // Block cloning where the file system shares extents (handlers/dup_extents.rs).
            | if fs.clones_extents {
                fs_info::FILE_SUPPORTS_BLOCK_REFCOUNTING
            } else {
                0
            },
        maximum_component_name_length: u32::try_from(fs.name_max.min(255)).unwrap_or(255),
        file_system_name: "NTFS".to_owned(),
    }
}

/// FileFsObjectIdInformation: the share's serial number as the start of the object ID.
fn object_id_info(serial: u32) -> ObjectIdInfo {
    let mut object_id = [0u8; 16];
    if let Some(s) = object_id.get_mut(..4) {
        s.copy_from_slice(&serial.to_le_bytes());
    }
    ObjectIdInfo {
        object_id,
        extended_info: [0; 48],
    }
}

/// FileFsSectorSizeInformation: one sector size for every purpose, aligned.
fn sector_size_info(sector: u32) -> SectorSizeInfo {
    SectorSizeInfo {
        logical_bytes_per_sector: sector,
        physical_bytes_per_sector_for_atomicity: sector,
        physical_bytes_per_sector_for_performance: sector,
        file_system_effective_physical_bytes_per_sector_for_atomicity: sector,
        flags: fs_info::SSINFO_FLAGS_ALIGNED_DEVICE
            | fs_info::SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
        byte_offset_for_sector_alignment: 0,
        byte_offset_for_partition_alignment: 0,
    }
}

fn security(open: &Open, addl: u32) -> Result<Vec<u8>, NtStatus> {
    let st = stat_of(open)?;
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    let sd = crate::security::store::effective(f.file.as_ref(), &st);
    let mut w = Writer::new();
    sd.encode_selected(addl, &mut w);
    Ok(w.into_vec())
}
