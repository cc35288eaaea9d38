//! Compounded requests (MS-SMB2 3.2.4.1.4): a CREATE and what follows it in one frame, so an
//! open, its first READ (or QUERY_DIRECTORY, WRITE, SET_INFO) and its CLOSE cost one round
//! trip instead of two or three. Every request after the CREATE is *related*: it names the
//! FileId all ones and the server substitutes the one the CREATE produced
//! (MS-SMB2 3.3.5.2.7.2); when the CREATE fails, the server fails the rest with its status.

use bytes::Bytes;
use smbq_proto::client::Incoming;
use smbq_proto::framing::frame_header;
use smbq_wire::close::CloseRequest;
use smbq_wire::header::flags;
use smbq_wire::transform::TRANSFORM_HEADER_LEN;
use smbq_wire::{Command, FileId, HEADER_LEN, Header, Writer};

use crate::conn::{Protect, Shared, Slot};
use crate::file::File;
use crate::session::check;
use crate::tree::{OpenOptions, Tree};
use crate::{Error, Metadata, ProtocolError};

/// One request of a compound: everything after its header.
pub(crate) struct Part {
    pub(crate) command: Command,
    /// The request body, data included (a WRITE's data follows its fixed part, where its
    /// DataOffset points).
    pub(crate) body: Vec<u8>,
    /// Bytes the request moves, for its credit charge.
    pub(crate) io_size: usize,
}

impl Part {
    pub(crate) fn close() -> Self {
        let mut w = Writer::new();
        CloseRequest {
            flags: 0,
            file_id: FileId::RELATED,
        }
        .encode(&mut w);
        Self {
            command: Command::CLOSE,
            body: w.into_vec(),
            io_size: 0,
        }
    }
}

/// Lays out a related compound: each message 8-byte aligned with NextCommand pointing at the
/// next, every one after the first flagged RELATED_OPERATIONS; signed one by one (the
/// signature covers a message and its padding, MS-SMB2 3.2.4.1.1) or sealed as one
/// (MS-SMB2 3.2.4.1.8). Returns the frame's segments.
fn layout(headers: &[Header], parts: Vec<Part>, protect: &Protect) -> Result<Vec<Bytes>, Error> {
    let count = parts.len();
    let mut frame = Vec::new();
    if protect.encrypt {
        // Room for the transform header: the compound is sealed where it lies.
        frame.resize(TRANSFORM_HEADER_LEN, 0);
    }
    for (index, (header, part)) in headers.iter().zip(parts).enumerate() {
        let last = index + 1 == count;
        let len = HEADER_LEN + part.body.len();
        let padded = if last { len } else { len.next_multiple_of(8) };
        let mut h = header.clone();
        if index > 0 {
            h.flags |= flags::RELATED_OPERATIONS;
        }
        if !last {
            h.next_command = u32::try_from(padded)
                .map_err(|_| ProtocolError::TooLarge("compound message too large"))?;
        }
        let mut w = Writer::with_capacity(padded);
        h.encode(&mut w);
        w.bytes(&part.body);
        w.zeros(padded - len);
        let mut m = w.into_vec();
        if protect.sign && !protect.encrypt {
            protect
                .session
                .as_ref()
                .ok_or(Error::Integrity("signing without a session"))?
                .sign(&mut m)?;
        }
        frame.extend_from_slice(&m);
    }
    if protect.encrypt {
        frame = protect
            .session
            .as_ref()
            .ok_or(Error::Integrity("encryption without a session"))?
            .seal_reserved(frame)?;
    }
    Ok(vec![
        Bytes::copy_from_slice(&frame_header(frame.len())),
        Bytes::from(frame),
    ])
}

impl Shared {
    /// Sends `parts` as one related compound and returns every final response, in order.
    pub(crate) async fn call_compound(
        &self,
        session_id: u64,
        tree_id: u32,
        parts: Vec<Part>,
        protect: Protect,
    ) -> Result<Vec<Result<Incoming, Error>>, Error> {
        let slots: Vec<Slot> = parts
            .iter()
            .map(|p| Slot {
                command: p.command,
                charge: self.charge(p.io_size),
            })
            .collect();
        let p = protect.clone();
        self.call_many(
            &slots,
            session_id,
            tree_id,
            protect,
            crate::conn::Lane::Any,
            move |_, headers| layout(headers, parts, &p),
        )
        .await
    }
}

/// The response to the `index`th request of a compound, or the failure that took its place.
fn nth(answers: &mut [Result<Incoming, Error>], index: usize) -> Result<Incoming, Error> {
    match answers.get_mut(index) {
        Some(slot) => std::mem::replace(
            slot,
            Err(ProtocolError::Missing("a compound response taken twice").into()),
        ),
        None => Err(ProtocolError::Missing("a compound response is missing").into()),
    }
}

impl Tree {
    /// CREATE of `path`, then `middle` on the new handle, then (with `close`) its CLOSE, in
    /// one frame. Returns the CREATE's response (checked) and the others' (unchecked: a
    /// READ at end of file answers END_OF_FILE, a listing's last QUERY_DIRECTORY
    /// NO_MORE_FILES).
    pub(crate) async fn compound_on(
        &self,
        path: &str,
        o: &OpenOptions,
        middle: Vec<Part>,
        close: bool,
    ) -> Result<(Incoming, Vec<Result<Incoming, Error>>), Error> {
        let mut parts = Vec::with_capacity(middle.len() + 2);
        parts.push(Part {
            command: Command::CREATE,
            body: crate::tree::create_body(path, o),
            io_size: 0,
        });
        let n = middle.len();
        parts.extend(middle);
        if close {
            parts.push(Part::close());
        }
        let mut answers = self
            .session
            .client()
            .shared
            .call_compound(
                self.session.id(),
                self.id,
                parts,
                self.session.protect(self.encrypt),
            )
            .await?;
        let create = nth(&mut answers, 0)?;
        check(&create, "CREATE")?;
        let rest = answers.into_iter().skip(1).take(n).collect::<Vec<_>>();
        // A CLOSE that went with the open is not checked: its failure is the server's
        // problem, not a reason to lose what the requests before it returned.
        Ok((create, rest))
    }

    /// CREATE + READ of the first `len` bytes in one round trip (MS-SMB2 3.2.4.1.4). The
    /// open's READ result is returned beside the handle (an error there, such as opening a
    /// directory, leaves the handle usable); the data is also kept on the handle, so
    /// [`crate::transfer::download`] from offset 0 starts with it instead of asking again.
    pub async fn open_and_read(
        &self,
        path: &str,
        o: &OpenOptions,
        len: u32,
    ) -> Result<(File, Result<Bytes, Error>), Error> {
        let len = len.min(self.max_read());
        let read = Part {
            command: Command::READ,
            body: crate::file::read_body(FileId::RELATED, 0, len),
            io_size: len as usize,
        };
        let (create, mut rest) = self.compound_on(path, o, vec![read], false).await?;
        let file = File::from_create(self.clone(), &create)?;
        let data = nth(&mut rest, 0).and_then(|r| crate::file::read_data(&r, len));
        if let Ok(d) = &data {
            file.keep_prefetch(0, len, d.clone());
        }
        Ok((file, data))
    }

    /// A whole small file: CREATE + READ + CLOSE in one round trip. `None` when the file is
    /// larger than `max` (it was closed again; read it with [`Tree::open`]).
    pub async fn read_small(
        &self,
        path: &str,
        o: &OpenOptions,
        max: u32,
    ) -> Result<Option<(Metadata, Bytes)>, Error> {
        let max = max.min(self.max_read());
        let read = Part {
            command: Command::READ,
            body: crate::file::read_body(FileId::RELATED, 0, max),
            io_size: max as usize,
        };
        let (create, mut rest) = self.compound_on(path, o, vec![read], true).await?;
        let meta = crate::file::metadata_of(&create)?;
        let data = crate::file::read_data(&nth(&mut rest, 0)?, max)?;
        Ok(((data.len() as u64) == meta.size).then_some((meta, data)))
    }

    /// Largest single READ, from the server's limit and the client's cap.
    pub fn max_read(&self) -> u32 {
        let c = self.session.client();
        c.negotiated().max_read.min(c.shared.config.max_io).max(1)
    }

    /// Largest single WRITE, from the server's limit and the client's cap.
    pub fn max_write(&self) -> u32 {
        let c = self.session.client();
        c.negotiated().max_write.min(c.shared.config.max_io).max(1)
    }

    /// CREATE + WRITE + CLOSE of a whole small file in one round trip; returns what CREATE
    /// reported. `data` must fit one WRITE ([`Tree::max_write`]).
    pub async fn write_small(
        &self,
        path: &str,
        o: &OpenOptions,
        data: &[u8],
    ) -> Result<Metadata, Error> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&l| l <= self.max_write())
            .ok_or(ProtocolError::TooLarge(
                "write larger than the negotiated maximum",
            ))?;
        let mut middle = Vec::new();
        if len > 0 {
            middle.push(Part {
                command: Command::WRITE,
                body: crate::file::write_body(FileId::RELATED, 0, data),
                io_size: data.len(),
            });
        }
        let (create, mut rest) = self.compound_on(path, o, middle, true).await?;
        if len > 0 {
            let r = nth(&mut rest, 0)?;
            check(&r, "WRITE")?;
            let n = smbq_wire::write::WriteResponse::decode(&r.msg)?.count;
            if n != len {
                return Err(ProtocolError::ShortWrite {
                    written: n.into(),
                    asked: len.into(),
                }
                .into());
            }
        }
        crate::file::metadata_of(&create)
    }

    /// CREATE + SET_INFO + CLOSE in one round trip (delete disposition, rename).
    pub(crate) async fn set_info_on(
        &self,
        path: &str,
        o: &OpenOptions,
        class: smbq_wire::fscc::FileInfoClass,
        buffer: Vec<u8>,
    ) -> Result<(), Error> {
        let set = Part {
            command: Command::SET_INFO,
            io_size: buffer.len(),
            body: crate::file::set_info_body(FileId::RELATED, class, &buffer),
        };
        let (_, mut rest) = self.compound_on(path, o, vec![set], true).await?;
        check(&nth(&mut rest, 0)?, "SET_INFO")
    }
}
