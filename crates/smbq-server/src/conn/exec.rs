//! One request run as its own task, many in flight as credits and the backlog allow. What runs
//! when, and what a compound, an interim response or a CANCEL means, the engine decides
//! (smbq-proto `engine/requests.rs`); this only runs the handler and reports back.

use std::sync::Arc;

use smbq_proto::engine::Execute;
use smbq_proto::{ConnView, Response};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

use crate::Server;
use crate::backlog::ChainBudget;

/// A finished request, for the loop to hand to the engine.
pub(super) struct Done {
    pub chain: u64,
    pub message_id: u64,
    pub response: Response,
    /// The chain's share of the backlog budget, taken by its first request and held until the
    /// chain's responses are handed to the writer.
    pub permit: Option<OwnedSemaphorePermit>,
    /// What the handler left for after its answer (crate::effects::after_answer); boxed,
    /// and only when there is something, so that a response stays small on its way.
    pub after: Option<Box<crate::open_state::Effects>>,
}

pub(super) fn spawn(
    x: Execute,
    budget: Option<ChainBudget>,
    view: Arc<ConnView>,
    server: &Arc<Server>,
    cancel: CancellationToken,
    arrival: crate::dispatch::Arrival,
    tx: &mpsc::Sender<Done>,
) {
    let server = server.clone();
    let tx = tx.clone();
    tokio::spawn(async move {
        let permit = match budget {
            Some(b) => b.acquire().await,
            None => None,
        };
        let (response, after) = crate::effects::answering_first(
            server.handle_arrived(&view, &x.request, cancel, arrival),
        )
        .await;
        let done = Done {
            chain: x.chain,
            message_id: x.request.header.message_id,
            response,
            permit,
            after: (!after.is_empty()).then(|| Box::new(after)),
        };
        // The loop is gone only when the connection is: nobody is left to answer. What the
        // request left for after its answer (breaks to other clients) still goes out.
        if let Err(mpsc::error::SendError(done)) = tx.send(done).await
            && let Some(after) = done.after
        {
            server.apply(*after);
        }
    });
}
