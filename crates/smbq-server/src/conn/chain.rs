//! One chain of requests (a compound, or a single request) run as its own task: related
//! requests in order with the FileId carried along, a failed CREATE failing what follows, and
//! interim responses for requests that take long (MS-SMB2 3.3.5.2.7, 3.3.4.2).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use smbq_proto::engine::{Chain, ChainItem, Completed};
use smbq_proto::{ConnView, Response};
use smbq_wire::{Command, NtStatus};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::Server;
use crate::backlog::ChainBudget;

/// Requests still running after this long get an interim STATUS_PENDING response
/// (MS-SMB2 3.3.4.2), so the client's timers do not fire and CANCEL can address them.
const INTERIM_AFTER: Duration = Duration::from_millis(300);

/// What a chain's task tells the connection loop.
pub(super) enum FromTask {
    Interim {
        header: smbq_wire::Header,
        encrypted: bool,
        reply: oneshot::Sender<u64>,
    },
    Done {
        items: Vec<Completed>,
        encrypted: bool,
        message_ids: Vec<u64>,
    },
}

/// Runs a chain in its own task: related requests in order, carrying the FileId
/// (MS-SMB2 3.3.5.2.7.2); a failed CREATE fails the related requests after it.
pub(super) fn dispatch(
    chain: Chain,
    view: Arc<ConnView>,
    server: &Arc<Server>,
    task_tx: &mpsc::UnboundedSender<FromTask>,
    running: &mut HashMap<u64, CancellationToken>,
    budget: ChainBudget,
) {
    let token = CancellationToken::new();
    let mut message_ids = Vec::new();
    for item in &chain.items {
        if let ChainItem::Run(r) = item {
            running.insert(r.header.message_id, token.clone());
            message_ids.push(r.header.message_id);
        }
    }
    let server = server.clone();
    let tx = task_tx.clone();
    let single = chain.items.len() == 1;
    let count = chain.items.len();
    tokio::spawn(async move {
        // Held until the responses are handed to the loop, which counts them as unsent bytes.
        let _budget = budget.acquire().await;
        let encrypted = chain.encrypted;
        let mut message_ids = message_ids;
        let mut done = Vec::with_capacity(chain.items.len());
        let mut related_fid = None;
        let mut failed: Option<NtStatus> = None;
        for (index, item) in chain.items.into_iter().enumerate() {
            match item {
                ChainItem::Answered(c) => {
                    // An invalid CREATE answered by the engine still fails what follows it.
                    if !c.header.is_related() {
                        failed = None;
                    }
                    if c.header.command == Command::CREATE && c.response.status.is_error() {
                        failed = Some(c.response.status);
                    }
                    done.push(c);
                }
                ChainItem::Run(mut req) => {
                    let header = req.header.clone();
                    if header.is_related() {
                        if let Some(status) = failed {
                            done.push(Completed {
                                header,
                                response: Response::error(status),
                                async_id: None,
                            });
                            continue;
                        }
                        req.related_file_id = related_fid;
                    } else {
                        // A new related segment starts: only a FileId it produces carries on.
                        failed = None;
                        related_fid = None;
                    }
                    let mut async_id = None;
                    // MS-SMB2 3.3.4.1.3 note (Windows): a CHANGE_NOTIFY ending a compound goes
                    // async alone; the responses before it are sent first (smbtorture
                    // smb2.compound.interim1).
                    let async_last = index + 1 == count && header.command == Command::CHANGE_NOTIFY;
                    let response = {
                        let fut = server.handle(&view, &req, token.clone());
                        tokio::pin!(fut);
                        // A CREATE waiting for an oplock break gets one too, as on Windows.
                        // One in the middle cannot go async: Windows fails it instead
                        // (smbtorture smb2.compound.interim2). Dropping the wait withdraws it.
                        let mid_notify = !single
                            && index + 1 < count
                            && header.command == Command::CHANGE_NOTIFY;
                        if mid_notify {
                            tokio::select! {
                                r = &mut fut => r,
                                _ = tokio::time::sleep(INTERIM_AFTER) => Response::error(NtStatus::INTERNAL_ERROR),
                            }
                        } else if single || async_last {
                            tokio::select! {
                                r = &mut fut => r,
                                _ = tokio::time::sleep(INTERIM_AFTER) => {
                                    if !single && !done.is_empty() {
                                        let mid = header.message_id;
                                        let before: Vec<u64> = message_ids.iter().copied().filter(|m| *m != mid).collect();
                                        message_ids.retain(|m| *m == mid);
                                        let _ = tx.send(FromTask::Done { items: std::mem::take(&mut done), encrypted, message_ids: before });
                                    }
                                    let (reply, rx) = oneshot::channel();
                                    let _ = tx.send(FromTask::Interim { header: header.clone(), encrypted, reply });
                                    async_id = rx.await.ok();
                                    fut.await
                                }
                            }
                        } else {
                            fut.await
                        }
                    };
                    if let Some(fid) = response.file_id {
                        related_fid = Some(fid);
                    }
                    if header.command == Command::CREATE && response.status.is_error() {
                        failed = Some(response.status);
                    }
                    done.push(Completed {
                        header,
                        response,
                        async_id,
                    });
                }
            }
        }
        let _ = tx.send(FromTask::Done {
            items: done,
            encrypted,
            message_ids,
        });
    });
}
