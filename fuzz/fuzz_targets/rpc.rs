//! smbq-rpc's srvsvc pipe (C706 chapter 12, MS-RPCE, MS-SRVS) driven by hostile pipe traffic.
//!
//! Input: byte 0 bit 0 says whether a valid bind goes first; the rest is u16-length-prefixed
//! chunks, each starting with an operation byte: WRITE the chunk, FSCTL_PIPE_TRANSCEIVE it, or
//! READ with the chunk's first two bytes as the size. Checks: errors other than PipeBusy close
//! the pipe; reads never exceed their size and account for pending output exactly; every
//! message read whole is one well-formed response PDU no larger than the fragment limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_fuzz::{chunks, rpc};
use smbq_rpc::pdu::{
    Header, PTYPE_ALTER_CONTEXT_RESP, PTYPE_BIND_ACK, PTYPE_BIND_NAK, PTYPE_FAULT, PTYPE_RESPONSE,
};
use smbq_rpc::pipe::MAX_FRAG;
use smbq_rpc::{PipeEndpoint, RpcError};

fn check_write(pipe: &PipeEndpoint, r: &Result<usize, RpcError>, len: usize) {
    match r {
        Ok(n) => assert_eq!(*n, len, "write must take every byte"),
        Err(RpcError::PipeBusy) => {}
        Err(e) => assert!(pipe.is_closed(), "{e:?} must close the pipe"),
    }
}

fn check_pdu(msg: &[u8]) {
    let h = Header::decode(msg).expect("the pipe produced an undecodable PDU header");
    assert_eq!(
        usize::from(h.frag_length),
        msg.len(),
        "frag_length vs message length"
    );
    assert!(
        h.frag_length <= MAX_FRAG,
        "fragment of {} octets",
        h.frag_length
    );
    assert!(h.is_little_endian());
    assert!(
        matches!(
            h.ptype,
            PTYPE_RESPONSE
                | PTYPE_FAULT
                | PTYPE_BIND_ACK
                | PTYPE_BIND_NAK
                | PTYPE_ALTER_CONTEXT_RESP
        ),
        "server sent PDU type {}",
        h.ptype
    );
}

/// One READ of at most `max` octets.
fn read(pipe: &mut PipeEndpoint, max: usize) {
    let at_start = pipe.message_remaining() == 0;
    let before = pipe.pending_output();
    let got = pipe.read(max);
    assert!(got.len() <= max, "read returned {} > {max}", got.len());
    assert_eq!(
        pipe.pending_output(),
        before - got.len(),
        "pending output accounting"
    );
    if at_start && !got.is_empty() && pipe.message_remaining() == 0 {
        check_pdu(&got);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut pipe = rpc::endpoint();
    if sel & 1 == 1 {
        let b = rpc::bind(1);
        let r = pipe.write(&b);
        assert_eq!(r, Ok(b.len()), "a valid bind was refused");
        read(&mut pipe, usize::from(MAX_FRAG));
    }
    for c in chunks(rest) {
        let Some((&op, payload)) = c.split_first() else {
            continue;
        };
        match op % 3 {
            0 => {
                let r = pipe.write(payload);
                check_write(&pipe, &r, payload.len());
            }
            1 => {
                let busy = pipe.pending_output() > 0;
                match pipe.transceive(payload, usize::from(MAX_FRAG)) {
                    Ok(out) => {
                        assert!(!busy, "transceive with unread output must be PipeBusy");
                        assert!(out.len() <= usize::from(MAX_FRAG));
                        if !out.is_empty() && pipe.message_remaining() == 0 {
                            check_pdu(&out);
                        }
                    }
                    Err(RpcError::PipeBusy) => assert!(busy, "PipeBusy without unread output"),
                    Err(e) => assert!(pipe.is_closed(), "{e:?} must close the pipe"),
                }
            }
            _ => {
                let max = match payload {
                    [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])),
                    _ => usize::from(MAX_FRAG),
                };
                read(&mut pipe, max);
            }
        }
    }
    // Drain: every remaining message must read out whole and well-formed.
    while pipe.pending_output() > 0 {
        read(&mut pipe, usize::MAX);
    }
});
