//! Requests in flight: the engine runs each frame's chain one request at a time (related
//! requests in order with the FileId carried along, MS-SMB2 3.3.5.2.7.2), decides when a
//! request gets an interim response (3.3.4.2), routes CANCEL to the request it names (3.3.5.16),
//! and builds the response frame when a chain is done. The server only runs what
//! [`Action::Execute`] hands it and gives the result to [`ServerConnection::complete`]; time is
//! passed in, so every rule here is tested without sockets or a clock
//! (`tests/requests.rs`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use smbq_wire::{Command, FileId, Header, NtStatus};

use super::{Action, ChainItem, Completed, ServerConnection, StreamId, Transmit};
use crate::request::{Request, Response};

/// Requests still running after this long get an interim STATUS_PENDING response
/// (MS-SMB2 3.3.4.2), so the client's timers do not fire and CANCEL can address them.
pub const INTERIM_AFTER: Duration = Duration::from_millis(300);

/// A request for the server to run; its result goes to [`ServerConnection::complete`].
#[derive(Debug)]
pub struct Execute {
    pub chain: u64,
    pub request: Box<Request>,
    /// On the first request of a chain: every request of the chain the server runs, with its
    /// CreditCharge, so the server can hold the chain's share of its budget until
    /// [`Action::Answered`] says the chain is done.
    pub chain_charges: Option<Vec<(u64, u16)>>,
}

/// What a request still running after [`INTERIM_AFTER`] gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slow {
    /// Nothing: it finishes when it finishes (requests inside a compound).
    Wait,
    /// An interim response; the final one is async (a lone request).
    Interim,
    /// A CHANGE_NOTIFY ending a compound: the responses before it are sent, then its interim
    /// alone (MS-SMB2 3.3.4.1.3 note, Windows; smbtorture smb2.compound.interim1).
    FlushThenInterim,
    /// A CHANGE_NOTIFY inside a compound cannot go async: Windows fails it with
    /// STATUS_INTERNAL_ERROR (smbtorture smb2.compound.interim2).
    Fail,
}

struct Running {
    header: Header,
    started: Instant,
    slow: Slow,
    async_id: Option<u64>,
}

/// One frame's requests, from the first to the last response.
struct ChainRun {
    stream: StreamId,
    encrypted: bool,
    count: usize,
    /// Index (in the frame) of the next item in `pending`.
    index: usize,
    pending: VecDeque<ChainItem>,
    done: Vec<Completed>,
    related_fid: Option<FileId>,
    /// A CREATE of the current related segment failed: what follows fails with its status.
    failed: Option<NtStatus>,
    current: Option<Running>,
    /// Message ids of the chain's requests for the server whose responses have not gone out.
    unanswered: Vec<u64>,
    /// Message ids a CANCEL named before their turn came (MS-SMB2 3.3.5.16).
    cancelled: Vec<u64>,
    had_charges: bool,
}

/// The engine's requests in flight.
#[derive(Default)]
pub(crate) struct InFlight {
    chains: HashMap<u64, ChainRun>,
    /// MessageId of a running request -> its chain.
    by_mid: HashMap<u64, u64>,
    /// AsyncId -> MessageId, for CANCEL by async id.
    async_ids: HashMap<u64, u64>,
    next_chain: u64,
}

impl InFlight {
    /// Where a CANCEL's target is: running (the server must stop it), waiting in its chain
    /// (it is answered CANCELLED when its turn comes), or unknown (already answered).
    fn cancel_target(&mut self, message_id: u64, async_id: Option<u64>) -> CancelTarget {
        let mid = match async_id {
            Some(a) => match self.async_ids.get(&a) {
                Some(m) => *m,
                None => return CancelTarget::Unknown,
            },
            None => message_id,
        };
        if self.by_mid.contains_key(&mid) {
            return CancelTarget::Running(mid);
        }
        for run in self.chains.values_mut() {
            let waiting = run.pending.iter().any(|i| match i {
                ChainItem::Run(r) => r.header.message_id == mid,
                ChainItem::Answered(_) => false,
            });
            if waiting {
                // Bounded by the chain's length: CANCEL costs the client no credit, so a repeat
                // must not cost the server memory.
                if !run.cancelled.contains(&mid) {
                    run.cancelled.push(mid);
                }
                return CancelTarget::Waiting;
            }
        }
        CancelTarget::Unknown
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }

    /// Whether a chain in flight still owes a response on session `id`.
    pub(crate) fn uses_session(&self, id: u64) -> bool {
        self.chains.values().any(|c| {
            c.current
                .as_ref()
                .is_some_and(|r| r.header.session_id == id)
                || c.done.iter().any(|d| d.header.session_id == id)
                || c.pending.iter().any(|i| match i {
                    ChainItem::Run(r) => r.header.session_id == id,
                    ChainItem::Answered(a) => a.header.session_id == id,
                })
        })
    }
}

enum CancelTarget {
    Running(u64),
    Waiting,
    Unknown,
}

impl ServerConnection {
    /// Starts the requests of one frame (validated items, in frame order).
    pub(super) fn start_chain(
        &mut self,
        stream: StreamId,
        items: Vec<ChainItem>,
        encrypted: bool,
        now: Instant,
    ) {
        let charges: Vec<(u64, u16)> = items
            .iter()
            .filter_map(|i| match i {
                ChainItem::Run(r) => Some((r.header.message_id, r.header.credit_charge)),
                ChainItem::Answered(_) => None,
            })
            .collect();
        let id = self.in_flight.next_chain;
        self.in_flight.next_chain = self.in_flight.next_chain.wrapping_add(1);
        let run = ChainRun {
            stream,
            encrypted,
            count: items.len(),
            index: 0,
            pending: items.into(),
            done: Vec::new(),
            related_fid: None,
            failed: None,
            current: None,
            unanswered: charges.iter().map(|(mid, _)| *mid).collect(),
            cancelled: Vec::new(),
            had_charges: !charges.is_empty(),
        };
        self.in_flight.chains.insert(id, run);
        self.advance(id, now, (!charges.is_empty()).then_some(charges));
    }

    /// The server finished request `message_id`. A result for a request the engine no longer
    /// waits for (one it already failed, see [`Slow::Fail`]) is dropped.
    pub fn complete(&mut self, message_id: u64, response: Response, now: Instant) {
        let Some(chain) = self.in_flight.by_mid.remove(&message_id) else {
            return;
        };
        let Some(run) = self.in_flight.chains.get_mut(&chain) else {
            return;
        };
        let Some(cur) = run.current.take() else {
            return;
        };
        if let Some(a) = cur.async_id {
            self.in_flight.async_ids.remove(&a);
        }
        record(run, cur.header, response, cur.async_id);
        self.advance(chain, now, None);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called, if at all.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.in_flight
            .chains
            .values()
            .filter_map(|c| c.current.as_ref())
            .filter(|r| r.slow != Slow::Wait && r.async_id.is_none())
            .map(|r| r.started + INTERIM_AFTER)
            .min()
    }

    /// Applies the rules for requests that have run for [`INTERIM_AFTER`] by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .in_flight
            .chains
            .iter()
            .filter(|(_, c)| {
                c.current.as_ref().is_some_and(|r| {
                    r.slow != Slow::Wait && r.async_id.is_none() && now >= r.started + INTERIM_AFTER
                })
            })
            .map(|(id, _)| *id)
            .collect();
        for chain in due {
            self.on_slow(chain, now);
        }
    }

    fn on_slow(&mut self, chain: u64, now: Instant) {
        let Some(run) = self.in_flight.chains.get_mut(&chain) else {
            return;
        };
        let Some(cur) = run.current.as_mut() else {
            return;
        };
        let (stream, encrypted) = (run.stream, run.encrypted);
        match cur.slow {
            Slow::Wait => {}
            Slow::Fail => {
                let Some(cur) = run.current.take() else {
                    return;
                };
                let mid = cur.header.message_id;
                self.in_flight.by_mid.remove(&mid);
                self.actions.push_back(Action::Cancel {
                    message_id: mid,
                    async_id: None,
                    session_id: cur.header.session_id,
                });
                record(
                    run,
                    cur.header,
                    Response::error(NtStatus::INTERNAL_ERROR),
                    None,
                );
                self.advance(chain, now, None);
            }
            Slow::Interim | Slow::FlushThenInterim => {
                let header = cur.header.clone();
                let mid = header.message_id;
                if cur.slow == Slow::FlushThenInterim && !run.done.is_empty() {
                    let done = std::mem::take(&mut run.done);
                    // Only what is flushed is answered: a CREATE may go async in the middle
                    // of its chain, with requests still to run after it.
                    let answered: Vec<u64> = done
                        .iter()
                        .map(|c| c.header.message_id)
                        .filter(|m| *m != mid && run.unanswered.contains(m))
                        .collect();
                    run.unanswered.retain(|m| !answered.contains(m));
                    let frame = self.finish(&done, encrypted);
                    self.transmit(stream, frame);
                    self.actions.push_back(Action::Answered {
                        chain,
                        message_ids: answered,
                        chain_done: false,
                    });
                }
                let (async_id, frame) = self.interim(&header, encrypted);
                self.transmit(stream, frame);
                self.in_flight.async_ids.insert(async_id, mid);
                if let Some(cur) = self
                    .in_flight
                    .chains
                    .get_mut(&chain)
                    .and_then(|r| r.current.as_mut())
                {
                    cur.async_id = Some(async_id);
                }
            }
        }
    }

    /// CANCEL (MS-SMB2 3.3.5.16): a running request is stopped by the server (it answers
    /// STATUS_CANCELLED, or completes if it was already done); one still waiting in its chain
    /// is answered STATUS_CANCELLED when its turn comes; an unknown one is ignored.
    pub(super) fn on_cancel(&mut self, hdr: &Header) {
        if let CancelTarget::Running(mid) =
            self.in_flight.cancel_target(hdr.message_id, hdr.async_id)
        {
            self.actions.push_back(Action::Cancel {
                message_id: mid,
                async_id: hdr.async_id,
                session_id: hdr.session_id,
            });
        }
    }

    /// A data stream was reset by the client (docs/multistream.md 7.2): every request that
    /// came on it and is not answered is cancelled as a CANCEL would (MS-SMB2 3.3.5.16). Their
    /// responses still go out on the stream.
    pub fn cancel_stream(&mut self, stream: StreamId) {
        let mut running = Vec::new();
        for run in self.in_flight.chains.values_mut() {
            if run.stream != stream {
                continue;
            }
            if let Some(cur) = &run.current {
                running.push((cur.header.message_id, cur.async_id, cur.header.session_id));
            }
            for item in &run.pending {
                if let ChainItem::Run(r) = item
                    && !run.cancelled.contains(&r.header.message_id)
                {
                    run.cancelled.push(r.header.message_id);
                }
            }
        }
        for (message_id, async_id, session_id) in running {
            self.actions.push_back(Action::Cancel {
                message_id,
                async_id,
                session_id,
            });
        }
    }

    /// Whether a request that came on `stream` still owes its response.
    pub fn stream_busy(&self, stream: StreamId) -> bool {
        self.in_flight.chains.values().any(|c| c.stream == stream)
    }

    /// Runs the chain forward until a request must go to the server or the chain is done.
    fn advance(&mut self, chain: u64, now: Instant, mut charges: Option<Vec<(u64, u16)>>) {
        let Some(run) = self.in_flight.chains.get_mut(&chain) else {
            return;
        };
        while let Some(item) = run.pending.pop_front() {
            let index = run.index;
            run.index += 1;
            let mut req = match item {
                ChainItem::Answered(c) => {
                    take_answered(run, c);
                    continue;
                }
                ChainItem::Run(req) => req,
            };
            let header = req.header.clone();
            let mid = header.message_id;
            if header.is_related() {
                // MS-SMB2 3.3.5.2.7.2: a related request takes the FileId of the requests
                // before it (`related_failure` when there is none to take).
                if let Some(status) = related_failure(run, header.command) {
                    run.done.push(Completed {
                        header,
                        response: Response::error(status),
                        async_id: None,
                        foreign_signed: false,
                    });
                    continue;
                }
                req.related_file_id = run.related_fid;
            } else {
                // A new related segment starts: only a FileId it produces carries on.
                run.failed = None;
                run.related_fid = None;
            }
            if let Some(at) = run.cancelled.iter().position(|m| *m == mid) {
                run.cancelled.swap_remove(at);
                record(run, header, Response::error(NtStatus::CANCELLED), None);
                continue;
            }
            let slow = slow_rule(header.command, index, run.count);
            run.current = Some(Running {
                header,
                started: now,
                slow,
                async_id: None,
            });
            self.in_flight.by_mid.insert(mid, chain);
            self.actions.push_back(Action::Execute(Execute {
                chain,
                request: req,
                chain_charges: charges.take(),
            }));
            return;
        }
        // Every item answered: the chain's frame goes out.
        let Some(run) = self.in_flight.chains.remove(&chain) else {
            return;
        };
        let frame = self.finish(&run.done, run.encrypted);
        self.transmit(run.stream, frame);
        if run.had_charges {
            self.actions.push_back(Action::Answered {
                chain,
                message_ids: run.unanswered,
                chain_done: true,
            });
        }
    }

    pub(super) fn transmit(&mut self, stream: StreamId, frame: Vec<bytes::Bytes>) {
        if !frame.is_empty() {
            self.transmits.push_back(Transmit { stream, frame });
        }
    }
}

/// An item the engine answered itself goes into the chain's responses as it is.
fn take_answered(run: &mut ChainRun, c: Completed) {
    // An invalid CREATE answered by the engine still fails what follows it.
    if !c.header.is_related() {
        run.failed = None;
    }
    if c.header.command == Command::CREATE && failed_create(c.response.status) {
        run.failed = Some(c.response.status);
    }
    run.done.push(c);
}

/// A CREATE that made no open: any status but SUCCESS, the warning STOPPED_ON_SYMLINK too (a
/// symlink met, MS-SMB2 2.2.2.2.1), so what follows it in its segment fails with that status,
/// as Samba's compound_create_err does.
fn failed_create(status: NtStatus) -> bool {
    status != NtStatus::SUCCESS
}

/// Why a related request fails before it runs, if it does: a CREATE of its segment failed
/// (that status), or it has no FileId to take (MS-SMB2 3.3.5.2.7.2), whatever FileId it carries
/// itself: with the status of the request before it when that one failed (smbtorture
/// smb2.compound.related5, related9), else with INVALID_PARAMETER.
fn related_failure(run: &ChainRun, command: Command) -> Option<NtStatus> {
    let no_file = run.related_fid.is_none() && names_file(command);
    let before = run
        .done
        .last()
        .map(|c| c.response.status)
        .filter(|s| s.is_error());
    run.failed
        .or(no_file.then(|| before.unwrap_or(NtStatus::INVALID_PARAMETER)))
}

/// What happens to the request at `index` of a chain of `count` if it runs long (MS-SMB2
/// 3.3.4.2 leaves which requests get an interim response to the server; 3.3.5.2.7 lets a
/// server fail compounded requests that would go async). As Windows Server 2022 does
/// (smbtorture smb2.compound_async, "All tests pass against Windows 2022", Samba commit
/// 42e739ab62c):
/// - SET_INFO never goes async, alone or compounded: a rename waiting for a lease break is
///   answered when it is done (rename_non_compound_no_async; Samba bc2d8798196);
/// - a CREATE (waiting for an oplock or lease break) goes async anywhere in a compound, the
///   answers before it sent first (getinfo_middle; MS-SMB2 3.3.5.2.7's note on Windows);
/// - CHANGE_NOTIFY goes async as the last of a compound and fails elsewhere in one;
/// - anything else alone gets an interim response, and in a compound waits.
fn slow_rule(command: Command, index: usize, count: usize) -> Slow {
    let last = index + 1 == count;
    match command {
        Command::SET_INFO => Slow::Wait,
        _ if count == 1 => Slow::Interim,
        Command::CREATE => Slow::FlushThenInterim,
        Command::CHANGE_NOTIFY if last => Slow::FlushThenInterim,
        Command::CHANGE_NOTIFY => Slow::Fail,
        _ => Slow::Wait,
    }
}

/// Commands whose request names an open by FileId (MS-SMB2 2.2): CREATE makes one instead.
fn names_file(command: Command) -> bool {
    matches!(
        command,
        Command::CLOSE
            | Command::FLUSH
            | Command::READ
            | Command::WRITE
            | Command::LOCK
            | Command::IOCTL
            | Command::QUERY_DIRECTORY
            | Command::CHANGE_NOTIFY
            | Command::QUERY_INFO
            | Command::SET_INFO
    )
}

/// Records a finished request and what it means for the rest of its related segment.
fn record(run: &mut ChainRun, header: Header, response: Response, async_id: Option<u64>) {
    if let Some(fid) = response.file_id {
        run.related_fid = Some(fid);
    }
    if header.command == Command::CREATE && failed_create(response.status) {
        run.failed = Some(response.status);
    }
    run.done.push(Completed {
        header,
        response,
        async_id,
        foreign_signed: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CANCEL costs no credit, so a client may repeat one forever: the record of cancelled
    /// requests a chain keeps must not grow with the repeats.
    #[test]
    fn repeated_cancels_of_a_waiting_request_keep_one_entry() {
        let waiting = Request {
            header: Header {
                command: Command::READ,
                message_id: 7,
                ..Default::default()
            },
            msg: bytes::Bytes::new(),
            session: None,
            encrypted: false,
            related_file_id: None,
            async_id: None,
        };
        let run = ChainRun {
            stream: StreamId::CONTROL,
            encrypted: false,
            count: 2,
            index: 1,
            pending: VecDeque::from([ChainItem::Run(Box::new(waiting))]),
            done: Vec::new(),
            related_fid: None,
            failed: None,
            current: None,
            unanswered: vec![6, 7],
            cancelled: Vec::new(),
            had_charges: true,
        };
        let mut f = InFlight::default();
        f.chains.insert(1, run);
        for _ in 0..10_000 {
            assert!(matches!(f.cancel_target(7, None), CancelTarget::Waiting));
        }
        assert!(matches!(f.cancel_target(99, None), CancelTarget::Unknown));
        assert_eq!(f.chains.get(&1).map(|c| c.cancelled.len()), Some(1));
    }
}
