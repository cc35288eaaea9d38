//! Writes the seed corpus, fuzz/seeds/<target>/*.bin: small valid inputs built with the
//! project's own encoders, so the fuzzers start past the framing checks.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example gen_seeds`.

use std::fs;
use std::path::{Path, PathBuf};

use smbq_auth::{AcceptStep, Credentials, Initiator};
use smbq_fuzz::driver::{FIRST_SESSION_ID, MID_AFTER_NEGOTIATE, MID_AFTER_SESSION, NOW};
use smbq_fuzz::{auth, join_chunks, rpc, smb2};
use smbq_wire::change_notify::{
    ChangeNotifyRequest, ChangeNotifyResponse, NotifyAction, encode_notify_entries,
};
use smbq_wire::close::CloseRequest;
use smbq_wire::create::CreateResponse;
use smbq_wire::create::{CreateDisposition, CreateRequest, ImpersonationLevel, OplockLevel};
use smbq_wire::create_context::MxAcResponse;
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, Dh2qRequest, Lease, LeaseV2, contexts_to_bytes,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::echo::EchoRequest;
use smbq_wire::fscc::dir_info::{DirClass, DirEntryInfo, DirListEncoder};
use smbq_wire::fscc::file_info::{
    AllInfo, BasicInfo, DispositionInfo, EndOfFileInfo, FullEa, NameInfo, RenameInfo, StreamEntry,
    StreamInfo,
};
use smbq_wire::fscc::fs_info::{AttributeInfo, SizeInfo, VolumeInfo};
use smbq_wire::fscc::{FileInfoClass, FsInfoClass};
use smbq_wire::header::flags;
use smbq_wire::ioctl::{CtlCode, IoctlRequest, ValidateNegotiateInfoRequest};
use smbq_wire::lock::{LockElement, LockRequest};
use smbq_wire::logoff::LogoffRequest;
use smbq_wire::negotiate::{Cipher, NegotiateContext, NegotiateResponse};
use smbq_wire::oplock_break::{LeaseBreakAck, OplockBreakAck};
use smbq_wire::query_directory::QueryDirectoryRequest;
use smbq_wire::query_info::{InfoType, QueryInfoRequest};
use smbq_wire::read::ReadRequest;
use smbq_wire::read::ReadResponse;
use smbq_wire::security::SecurityDescriptor;
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::smb1_negotiate::Smb1NegotiateRequest;
use smbq_wire::transform::TransformHeader;
use smbq_wire::tree_connect::{TreeConnectRequest, TreeDisconnectRequest};
use smbq_wire::write::WriteRequest;
use smbq_wire::{Command, Dialect, FileId, HEADER_LEN, NtStatus, Writer};

const FID: FileId = FileId {
    persistent: 0x11,
    volatile: 0x22,
};

fn enc(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    f(&mut w);
    w.into_vec()
}

struct Out {
    root: PathBuf,
}

impl Out {
    fn target(&self, name: &str) -> Target {
        let dir = self.root.join(name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create seed dir");
        Target { dir }
    }
}

struct Target {
    dir: PathBuf,
}

impl Target {
    fn put(&self, name: &str, bytes: &[u8]) {
        fs::write(self.dir.join(format!("{name}.bin")), bytes).expect("write seed");
    }
}

/// Body bytes (after the 64-byte header) of each request, by command.
fn request_bodies() -> Vec<(&'static str, Command, Vec<u8>)> {
    let name = utf16le_encode("dir\\file.txt");
    let path = utf16le_encode("\\\\FUZZSRV\\data");
    let lease = Lease {
        key: [3; 16],
        state: 7,
        v2: Some(LeaseV2 {
            parent_key: [4; 16],
            epoch: 1,
        }),
        ..Default::default()
    }
    .to_bytes();
    let dh2q = Dh2qRequest {
        timeout: 0,
        flags: 0,
        create_guid: [5; 16],
    }
    .to_bytes();
    let ctxs = contexts_to_bytes(&[
        CreateContext::new(CreateContextTag::MXAC, &[]),
        CreateContext::new(CreateContextTag::QFID, &[]),
        CreateContext::new(CreateContextTag::RQLS, &lease),
        CreateContext::new(CreateContextTag::DH2Q, &dh2q),
    ]);
    let vni = enc(|w| {
        ValidateNegotiateInfoRequest {
            capabilities: 0x7f,
            guid: smb2::CLIENT_GUID,
            security_mode: 1,
            dialects: vec![Dialect::SMB3_0, Dialect::SMB3_0_2],
        }
        .encode(w)
    });
    let basic = BasicInfo {
        last_write_time: NOW,
        file_attributes: 0x20,
        ..Default::default()
    };
    let rename = RenameInfo {
        replace_if_exists: true,
        root_directory: 0,
        file_name: "new.txt".into(),
    };
    let star = utf16le_encode("*");
    let body = |f: &dyn Fn(&mut Writer)| enc(|w| f(w));
    vec![
        (
            "negotiate",
            Command::NEGOTIATE,
            smb2::negotiate(0)[HEADER_LEN..].to_vec(),
        ),
        ("session_setup", Command::SESSION_SETUP, {
            let tok = auth::initiator(true).first_token();
            smb2::session_setup(1, 0, &tok)[HEADER_LEN..].to_vec()
        }),
        (
            "logoff",
            Command::LOGOFF,
            body(&|w| LogoffRequest.encode(w)),
        ),
        (
            "tree_connect",
            Command::TREE_CONNECT,
            body(&|w| {
                TreeConnectRequest {
                    flags: 0,
                    path_utf16: &path,
                    contexts: vec![],
                }
                .encode(w)
            }),
        ),
        (
            "tree_disconnect",
            Command::TREE_DISCONNECT,
            body(&|w| TreeDisconnectRequest.encode(w)),
        ),
        (
            "create",
            Command::CREATE,
            body(&|w| {
                CreateRequest {
                    requested_oplock_level: OplockLevel::LEASE,
                    impersonation_level: ImpersonationLevel::IMPERSONATION,
                    desired_access: 0x0012_019f,
                    file_attributes: 0x80,
                    share_access: 7,
                    create_disposition: CreateDisposition::OPEN_IF,
                    create_options: 0x40,
                    name: &name,
                    contexts: &ctxs,
                    ..Default::default()
                }
                .encode(w)
            }),
        ),
        (
            "close",
            Command::CLOSE,
            body(&|w| {
                CloseRequest {
                    flags: 1,
                    file_id: FID,
                }
                .encode(w)
            }),
        ),
        (
            "flush",
            Command::FLUSH,
            body(&|w| smbq_wire::flush::FlushRequest { file_id: FID }.encode(w)),
        ),
        (
            "read",
            Command::READ,
            body(&|w| {
                ReadRequest {
                    padding: 0x50,
                    length: 4096,
                    file_id: FID,
                    ..Default::default()
                }
                .encode(w)
            }),
        ),
        (
            "write",
            Command::WRITE,
            body(&|w| {
                WriteRequest {
                    offset: 10,
                    file_id: FID,
                    data: b"hello world",
                    ..Default::default()
                }
                .encode(w)
            }),
        ),
        (
            "lock",
            Command::LOCK,
            body(&|w| {
                LockRequest {
                    lock_sequence: 0,
                    file_id: FID,
                    locks: vec![LockElement {
                        offset: 0,
                        length: 10,
                        flags: 2,
                    }],
                }
                .encode(w)
            }),
        ),
        (
            "ioctl_validate_negotiate",
            Command::IOCTL,
            body(&|w| {
                IoctlRequest {
                    ctl_code: CtlCode::VALIDATE_NEGOTIATE_INFO,
                    file_id: FileId::RELATED,
                    input: &vni,
                    max_output_response: 24,
                    flags: 1,
                    ..Default::default()
                }
                .encode(w)
            }),
        ),
        (
            "cancel",
            Command::CANCEL,
            body(&|w| smbq_wire::cancel::CancelRequest.encode(w)),
        ),
        ("echo", Command::ECHO, body(&|w| EchoRequest.encode(w))),
        (
            "query_directory",
            Command::QUERY_DIRECTORY,
            body(&|w| {
                QueryDirectoryRequest {
                    file_information_class: FileInfoClass::ID_BOTH_DIRECTORY.0,
                    flags: 1,
                    file_index: 0,
                    file_id: FID,
                    file_name: &star,
                    output_buffer_length: 65536,
                }
                .encode(w)
            }),
        ),
        (
            "change_notify",
            Command::CHANGE_NOTIFY,
            body(&|w| {
                ChangeNotifyRequest {
                    flags: 1,
                    output_buffer_length: 4096,
                    file_id: FID,
                    completion_filter: 0x17,
                }
                .encode(w)
            }),
        ),
        (
            "query_info",
            Command::QUERY_INFO,
            body(&|w| {
                QueryInfoRequest {
                    info_type: InfoType::FILE,
                    file_info_class: FileInfoClass::ALL.0,
                    output_buffer_length: 4096,
                    file_id: FID,
                    ..Default::default()
                }
                .encode(w)
            }),
        ),
        (
            "set_info_basic",
            Command::SET_INFO,
            body(&|w| {
                SetInfoRequest {
                    info_type: InfoType::FILE,
                    file_info_class: FileInfoClass::BASIC.0,
                    additional_information: 0,
                    file_id: FID,
                    buffer: &basic.to_bytes(),
                }
                .encode(w)
            }),
        ),
        (
            "set_info_rename",
            Command::SET_INFO,
            body(&|w| {
                SetInfoRequest {
                    info_type: InfoType::FILE,
                    file_info_class: FileInfoClass::RENAME.0,
                    additional_information: 0,
                    file_id: FID,
                    buffer: &enc(|w| rename.encode(w)),
                }
                .encode(w)
            }),
        ),
        (
            "set_info_security",
            Command::SET_INFO,
            body(&|w| {
                SetInfoRequest {
                    info_type: InfoType::SECURITY,
                    file_info_class: 0,
                    additional_information: 0x7,
                    file_id: FID,
                    buffer: &SecurityDescriptor::from_posix(0, 0, 0o640, true).to_bytes(),
                }
                .encode(w)
            }),
        ),
        (
            "oplock_break_lease",
            Command::OPLOCK_BREAK,
            body(&|w| {
                OplockBreakAck::Lease(LeaseBreakAck {
                    flags: 0,
                    lease_key: [3; 16],
                    lease_state: 1,
                    lease_duration: 0,
                })
                .encode(w)
            }),
        ),
    ]
}

fn smb2_request(out: &Out) {
    let t = out.target("smb2_request");
    for (name, cmd, body) in request_bodies() {
        let mut seed = vec![cmd.0 as u8];
        seed.extend_from_slice(&body);
        t.put(name, &seed);
    }
    // Responses: a selector byte with bit 7 set that is still the command modulo 19.
    let resp = |name: &str, cmd: Command, body: Vec<u8>| {
        let sel = (128u16..=255).find(|s| s % 19 == cmd.0).expect("selector") as u8;
        t.put(name, &[vec![sel], body].concat());
    };
    let notify = enc(|w| {
        encode_notify_entries(
            [
                (NotifyAction::ADDED, "new.txt"),
                (NotifyAction::REMOVED, "old.txt"),
            ],
            w,
        );
    });
    resp(
        "change_notify_response",
        Command::CHANGE_NOTIFY,
        enc(|w| ChangeNotifyResponse { output: &notify }.encode(w)),
    );
    let mxac = MxAcResponse {
        query_status: NtStatus::SUCCESS,
        maximal_access: 0x1f01ff,
    }
    .to_bytes();
    let ctxs = contexts_to_bytes(&[CreateContext::new(CreateContextTag::MXAC, &mxac)]);
    resp(
        "create_response",
        Command::CREATE,
        enc(|w| {
            CreateResponse {
                file_id: FID,
                end_of_file: 5,
                contexts: &ctxs,
                ..Default::default()
            }
            .encode(w)
        }),
    );
    resp(
        "read_response",
        Command::READ,
        enc(|w| {
            ReadResponse {
                data: b"hello",
                ..Default::default()
            }
            .encode(w)
        }),
    );
    resp(
        "negotiate_response",
        Command::NEGOTIATE,
        enc(|w| {
            NegotiateResponse {
                security_mode: 1,
                dialect: Dialect::SMB3_1_1,
                max_read_size: 65536,
                security_buffer: &auth::initiator(true).first_token(),
                contexts: vec![NegotiateContext::Encryption {
                    ciphers: vec![Cipher::AES_128_GCM],
                }],
                ..Default::default()
            }
            .encode(w)
        }),
    );
}

fn headers(out: &Out) {
    let t = out.target("header");
    t.put("negotiate", &smb2::negotiate(0)[..HEADER_LEN]);
    let mut h = smb2::header(Command::CHANGE_NOTIFY, 9, 0x1001, 0);
    h.async_id = Some(5);
    h.flags = flags::SERVER_TO_REDIR | flags::SIGNED;
    t.put("async_response", &h.to_bytes());

    let t = out.target("transform_header");
    let th = TransformHeader {
        signature: [1; 16],
        nonce: [2; 16],
        original_message_size: 68,
        flags: 1,
        session_id: FIRST_SESSION_ID,
    };
    let mut frame = th.to_bytes().to_vec();
    frame.extend_from_slice(&[0xAB; 68]);
    t.put("transform", &frame);

    let t = out.target("smb1_negotiate");
    let req = Smb1NegotiateRequest {
        dialects: vec![
            b"PC NETWORK PROGRAM 1.0",
            b"NT LM 0.12",
            b"SMB 2.002",
            b"SMB 2.???",
        ],
    };
    t.put("smbclient", &enc(|w| req.encode(w)));
}

fn fscc(out: &Out) {
    let t = out.target("fscc");
    let put = |name: &str, class: u8, kind: u8, buf: Vec<u8>| {
        let mut seed = vec![class, kind];
        seed.extend_from_slice(&buf);
        t.put(name, &seed);
    };
    let file = 0;
    let fs = 1;
    let dir = 2;
    put(
        "basic",
        FileInfoClass::BASIC.0,
        file,
        BasicInfo {
            creation_time: NOW,
            ..Default::default()
        }
        .to_bytes(),
    );
    put(
        "rename",
        FileInfoClass::RENAME.0,
        file,
        enc(|w| {
            RenameInfo {
                replace_if_exists: false,
                root_directory: 0,
                file_name: "a\\b.txt".into(),
            }
            .encode(w)
        }),
    );
    put(
        "disposition",
        FileInfoClass::DISPOSITION.0,
        file,
        DispositionInfo {
            delete_pending: true,
        }
        .to_bytes(),
    );
    put(
        "end_of_file",
        FileInfoClass::END_OF_FILE.0,
        file,
        EndOfFileInfo { end_of_file: 4096 }.to_bytes(),
    );
    put(
        "full_ea",
        FileInfoClass::FULL_EA.0,
        file,
        enc(|w| {
            FullEa::encode_list(
                &[
                    FullEa {
                        flags: 0,
                        name: b"user.one",
                        value: b"1",
                    },
                    FullEa {
                        flags: 0x80,
                        name: b"user.two",
                        value: b"value two",
                    },
                ],
                w,
            )
        }),
    );
    put(
        "all",
        FileInfoClass::ALL.0,
        file,
        enc(|w| {
            AllInfo {
                name: NameInfo {
                    file_name: "\\dir\\file.txt".into(),
                },
                ..Default::default()
            }
            .encode(w)
        }),
    );
    put(
        "stream",
        FileInfoClass::STREAM.0,
        file,
        enc(|w| {
            StreamInfo::encode(
                &[
                    StreamEntry {
                        name: StreamInfo::DEFAULT_DATA_STREAM.into(),
                        size: 5,
                        allocation_size: 8,
                    },
                    StreamEntry {
                        name: ":extra:$DATA".into(),
                        size: 1,
                        allocation_size: 8,
                    },
                ],
                w,
            )
        }),
    );
    put(
        "volume",
        FsInfoClass::VOLUME.0,
        fs,
        enc(|w| {
            VolumeInfo {
                volume_serial_number: 7,
                volume_label: "data".into(),
                ..Default::default()
            }
            .encode(w)
        }),
    );
    put(
        "attribute",
        FsInfoClass::ATTRIBUTE.0,
        fs,
        enc(|w| {
            AttributeInfo {
                file_system_attributes: 0x4f,
                maximum_component_name_length: 255,
                file_system_name: "NTFS".into(),
            }
            .encode(w)
        }),
    );
    put(
        "security_descriptor",
        0,
        3,
        SecurityDescriptor::from_posix(1000, 100, 0o754, false).to_bytes(),
    );
    put(
        "size",
        FsInfoClass::SIZE.0,
        fs,
        SizeInfo {
            bytes_per_sector: 512,
            ..Default::default()
        }
        .to_bytes(),
    );
    for class in [
        DirClass::IdBothDirectory,
        DirClass::Names,
        DirClass::IdExtdDirectory,
    ] {
        let mut e = DirListEncoder::new(class, 65536);
        for (n, s) in [
            ("file.txt", "FILE.TXT"),
            ("a long name.docx", "ALONGN~1.DOC"),
        ] {
            let entry = DirEntryInfo {
                file_index: 1,
                end_of_file: 5,
                file_attributes: 0x20,
                file_id: 42,
                name: n.into(),
                short_name: s.into(),
                ..Default::default()
            };
            assert!(e.push(&entry));
        }
        put(
            &format!("dir_{class:?}"),
            class.info_class().0,
            dir,
            e.finish(),
        );
    }
}

/// Every leg of one exchange: (first token, challenge, authenticate, final server token).
fn exchange(spnego: bool, creds: Option<Credentials>) -> [Vec<u8>; 4] {
    let mut init = match creds {
        Some(c) => {
            let i = Initiator::with_randomness(
                c,
                auth::CLIENT_CHALLENGE,
                auth::CLIENT_SESSION_KEY,
                NOW,
            );
            if spnego { i } else { i.raw_ntlmssp() }
        }
        None => auth::initiator(spnego),
    };
    let mut acc = auth::acceptor(true);
    let first = init.first_token();
    let Ok(AcceptStep::Continue(challenge)) = acc.step(&first, &auth::accounts) else {
        panic!("leg 1")
    };
    let (authenticate, _) = init.step(&challenge).expect("leg 2");
    let Ok(AcceptStep::Done { token, .. }) = acc.step(&authenticate, &auth::accounts) else {
        panic!("leg 3")
    };
    [first, challenge, authenticate, token]
}

fn auth_seeds(out: &Out) {
    for (target, spnego) in [("ntlm", false), ("spnego", true)] {
        let t = out.target(target);
        let [first, challenge, authenticate, fin] = exchange(spnego, None);
        let with = |sel: u8, body: Vec<u8>| [vec![sel], body].concat();
        t.put(
            "fresh_full_logon",
            &with(0, join_chunks(&[&first, &authenticate])),
        );
        t.put("fresh_first_leg", &with(0, join_chunks(&[&first])));
        t.put("after_first_leg", &with(1, join_chunks(&[&authenticate])));
        t.put("xor_unchanged", &with(2, vec![0; authenticate.len()]));
        let mut flip = vec![0; authenticate.len()];
        flip[authenticate.len() / 2] = 1;
        t.put("xor_one_bit", &with(2, flip));
        t.put("initiator", &with(3, join_chunks(&[&challenge, &fin])));
        let [a1, _, a3, _] = exchange(spnego, Some(Credentials::anonymous()));
        t.put("anonymous_guest", &with(0x80, join_chunks(&[&a1, &a3])));
        let stranger = Credentials::with_password("mallory", "SMBQ", "guess", "WS");
        let [s1, _, s3, _] = exchange(spnego, Some(stranger));
        t.put("unknown_user_guest", &with(0x80, join_chunks(&[&s1, &s3])));
    }
}

fn rpc_seeds(out: &Out) {
    let t = out.target("rpc");
    let conv = rpc::conversation();
    let write = |pdu: &[u8]| [&[0u8][..], pdu].concat();
    let transceive = |pdu: &[u8]| [&[1u8][..], pdu].concat();
    let read = vec![2u8, 0xB8, 0x10];
    let mut parts = Vec::new();
    for pdu in &conv {
        parts.push(write(pdu));
        parts.push(read.clone());
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    t.put("conversation", &[vec![0], join_chunks(&refs)].concat());
    let calls: Vec<Vec<u8>> = conv[1..].iter().map(|p| transceive(p)).collect();
    let refs: Vec<&[u8]> = calls.iter().map(Vec::as_slice).collect();
    t.put("bound_transceive", &[vec![1], join_chunks(&refs)].concat());
    // A request split across two writes.
    let (a, b) = conv[1].split_at(20);
    let refs: Vec<Vec<u8>> = vec![write(a), write(b), read.clone()];
    let refs: Vec<&[u8]> = refs.iter().map(Vec::as_slice).collect();
    t.put("split_request", &[vec![1], join_chunks(&refs)].concat());
}

fn engine_seeds(out: &Out) {
    let t = out.target("engine");
    let sid = FIRST_SESSION_ID;
    let with = |sel: u8, frames: &[Vec<u8>]| {
        let mut s = vec![sel];
        for f in frames {
            s.extend_from_slice(&smb2::frame(f));
        }
        s
    };
    // Fresh connection.
    t.put("negotiate", &with(0, &[smb2::negotiate(0)]));
    let smb1 = enc(|w| {
        Smb1NegotiateRequest {
            dialects: vec![b"NT LM 0.12", b"SMB 2.002", b"SMB 2.???"],
        }
        .encode(w)
    });
    t.put("smb1_negotiate", &with(0, &[smb1]));
    // After NEGOTIATE.
    let mid = MID_AFTER_NEGOTIATE;
    let tok = auth::initiator(true).first_token();
    t.put(
        "session_setup_leg1",
        &with(1, &[smb2::session_setup(mid, 0, &tok)]),
    );
    let echo = |mid, sid| {
        smb2::message(&smb2::header(Command::ECHO, mid, sid, 0), |w| {
            EchoRequest.encode(w)
        })
    };
    t.put("echo_unauthenticated", &with(1, &[echo(mid, 0)]));
    // After the logon: requests in the session, alone and compounded.
    let mid = MID_AFTER_SESSION;
    let bodies = request_bodies();
    let req = |name: &str, mid: u64, tree: u32| {
        let (_, cmd, body) = bodies
            .iter()
            .find(|(n, _, _)| *n == name)
            .expect("known body");
        let mut m = smb2::message(&smb2::header(*cmd, mid, sid, tree), |_| {});
        m.extend_from_slice(body);
        m
    };
    t.put("tree_connect", &with(3, &[req("tree_connect", mid, 0)]));
    let mut related = vec![
        req("create", mid, 1),
        req("read", mid + 1, 1),
        req("close", mid + 2, 1),
    ];
    for m in related.iter_mut().skip(1) {
        let h = smbq_wire::Header::decode(m).expect("header");
        let mut h2 = h.clone();
        h2.flags |= flags::RELATED_OPERATIONS;
        let hb = h2.to_bytes();
        m[..HEADER_LEN].copy_from_slice(&hb);
    }
    t.put(
        "compound_create_read_close",
        &with(3, &[smb2::compound(&related)]),
    );
    t.put(
        "echo_change_notify",
        &with(3, &[echo(mid, sid), req("change_notify", mid + 1, 1)]),
    );
    t.put(
        "write_ioctl_logoff",
        &with(
            3,
            &[
                req("write", mid, 1),
                req("ioctl_validate_negotiate", mid + 1, 1),
                req("logoff", mid + 2, 0),
            ],
        ),
    );
    t.put("cancel", &with(3, &[req("cancel", mid, 1)]));
}

/// MS-XCA targets: a u32 expected length, then a stream: the spec's section 3 examples and
/// our own encoder's output for text, a run and every byte value.
fn xca_seeds(out: &Out) {
    type Compress = fn(&[u8], &mut Vec<u8>);
    let alphabet: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    let abc = b"abc".repeat(100);
    let text = b"the server compresses the share's file, the client reads the file. ".repeat(40);
    let all: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let targets: [(&str, Compress); 3] = [
        ("xca_lz77", smbq_xca::lz77::compress),
        ("xca_lz77_huffman", smbq_xca::lz77_huffman::compress),
        ("xca_lznt1", smbq_xca::lznt1::compress),
    ];
    for (name, compress) in targets {
        let t = out.target(name);
        for (seed, plain) in [
            ("alphabet", alphabet),
            ("abc300", &abc),
            ("text", &text),
            ("all", &all),
        ] {
            let mut input = (plain.len() as u32).to_le_bytes().to_vec();
            compress(plain, &mut input);
            t.put(seed, &input);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let out = Out { root };
    headers(&out);
    smb2_request(&out);
    fscc(&out);
    auth_seeds(&out);
    rpc_seeds(&out);
    engine_seeds(&out);
    xca_seeds(&out);
    println!("seeds written to {}", out.root.display());
}
