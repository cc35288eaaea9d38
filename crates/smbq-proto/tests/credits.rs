//! The credit window through the engine (MS-SMB2 3.3.1.1, 3.3.5.2.3, 3.3.5.2.5).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::{Limits, Response, Violation};
use smbq_wire::read::ReadRequest;
use smbq_wire::{Command, Dialect, FileId, NtStatus, Writer};

fn logged_in(limits: Limits) -> (Server, Client) {
    let mut cfg = config();
    cfg.limits = limits;
    let mut server = Server::new(cfg);
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesGmac],
    ));
    client.connect(&mut server);
    (server, client)
}

fn read_request(client: &mut Client, length: u32, charge: u16) -> Vec<u8> {
    let h = client.header(Command::READ, charge);
    let mut w = Writer::new();
    h.encode(&mut w);
    ReadRequest {
        padding: 0x50,
        length,
        file_id: FileId {
            persistent: 1,
            volatile: 2,
        },
        ..Default::default()
    }
    .encode(&mut w);
    w.into_vec()
}

#[test]
fn message_id_outside_the_window_is_a_violation() {
    // Before NEGOTIATE only id 0 is granted.
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.next_mid = 5;
    let req = client.negotiate_request();
    assert_eq!(
        server.feed(&frame(&req)).unwrap_err(),
        Violation::BadMessageId(5)
    );

    let (mut server, mut client) = logged_in(Limits::default());
    // Far above the granted window.
    client.next_mid += 10_000;
    let echo = client.echo(false);
    let mid = client.next_mid - 1;
    assert_eq!(
        server.feed(&frame(&echo)).unwrap_err(),
        Violation::BadMessageId(mid)
    );

    // An id already used.
    let (mut server, mut client) = logged_in(Limits::default());
    let echo = client.echo(false);
    server.exchange_engine_only(&frame(&echo)).unwrap();
    assert_eq!(
        server.feed(&frame(&echo)).unwrap_err(),
        Violation::BadMessageId(client.next_mid - 1)
    );
}

#[test]
fn skipped_ids_stay_usable() {
    let (mut server, mut client) = logged_in(Limits::default());
    let base = client.next_mid;
    client.next_mid = base + 3;
    let e3 = client.echo(false);
    client.next_mid = base;
    let e0 = client.echo(false);
    for m in [e3, e0] {
        let (frames, _) = server.exchange_engine_only(&frame(&m)).unwrap();
        assert_eq!(
            client.receive(&single(frames)).one().status(),
            NtStatus::SUCCESS
        );
    }
}

/// MS-SMB2 3.3.5.2.5: CreditCharge must cover the payload, one credit per 64 KiB.
#[test]
fn multi_credit_read_must_be_charged_for_its_length() {
    let (mut server, mut client) = logged_in(Limits::default());

    // 192 KiB needs 3 credits; a charge of 1 is answered INVALID_PARAMETER by the engine.
    let short = read_request(&mut client, 3 * 65536, 1);
    let actions = server.feed(&frame(&short)).unwrap();
    assert!(
        executes(&actions).is_empty(),
        "answered by the engine: {actions:?}"
    );
    let resp = client.receive(&single(server.sent()));
    assert_eq!(resp.one().status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(resp.one().header.command, Command::READ);

    // One byte more than 2 * 64 KiB also needs 3.
    let short = read_request(&mut client, 2 * 65536 + 1, 2);
    let (frames, _) = server.exchange_engine_only(&frame(&short)).unwrap();
    assert_eq!(
        client.receive(&single(frames)).one().status(),
        NtStatus::INVALID_PARAMETER
    );

    // Properly charged: passed up, and it used three message ids.
    let ok = read_request(&mut client, 3 * 65536, 3);
    let first = client.next_mid - 3;
    let mut passed = Vec::new();
    let (frames, _) = server
        .exchange(&frame(&ok), &mut |r| {
            passed.push((r.header.message_id, r.header.credit_charge));
            Response::error(NtStatus::END_OF_FILE)
        })
        .unwrap();
    assert_eq!(passed, vec![(first, 3)]);
    let m = client.receive(&single(frames)).one().clone();
    assert_eq!(m.status(), NtStatus::END_OF_FILE);
    assert_eq!(m.header.credit_charge, 3);
    // Ids first+1 and first+2 went with the charge.
    client.next_mid = first + 1;
    let echo = client.echo(false);
    assert_eq!(
        server.feed(&frame(&echo)).unwrap_err(),
        Violation::BadMessageId(first + 1)
    );
}

#[test]
fn small_read_with_charge_one_passes() {
    let (mut server, mut client) = logged_in(Limits::default());
    let req = read_request(&mut client, 65536, 1);
    let mut n = 0;
    server
        .exchange(&frame(&req), &mut |_| {
            n += 1;
            Response::error(NtStatus::END_OF_FILE)
        })
        .unwrap();
    assert_eq!(n, 1);
}

/// Credits outstanding never exceed Limits::max_credits, however many the client asks for,
/// and a client that spent everything is never left with none.
#[test]
fn grants_are_capped_by_max_credits() {
    const MAX: u16 = 16;
    let limits = Limits {
        max_credits: MAX,
        ..Limits::default()
    };
    let mut cfg = config();
    cfg.limits = limits;
    let mut server = Server::new(cfg);
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.credit_request = 1000;
    client.connect(&mut server);
    assert!(client.credits <= i64::from(MAX));
    assert_eq!(
        client.credits,
        i64::from(MAX),
        "asked for many: gets the cap"
    );

    // Spend the whole window in one burst of frames, then collect the answers.
    let mut burst = Vec::new();
    for _ in 0..MAX {
        burst.extend(frame(&client.echo(false)));
    }
    assert_eq!(client.credits, 0);
    let (frames, _) = server.exchange_engine_only(&burst).unwrap();
    assert_eq!(frames.len(), usize::from(MAX));
    for f in frames {
        client.receive(&f);
        assert!(
            client.credits <= i64::from(MAX),
            "client holds {} credits, cap {MAX}",
            client.credits
        );
    }
    assert_eq!(client.credits, i64::from(MAX));

    // One more than granted is outside the window.
    client.next_mid += u64::from(MAX);
    let echo = client.echo(false);
    assert!(matches!(
        server.feed(&frame(&echo)).unwrap_err(),
        Violation::BadMessageId(_)
    ));
}

#[test]
fn zero_credit_requests_never_starve_the_client() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::legacy(Dialect::SMB2_1));
    client.credit_request = 0;
    client.negotiate(&mut server);
    assert_eq!(client.credits, 1, "a client with no credits gets one");
    for _ in 0..5 {
        let echo = client.echo(false);
        let (frames, _) = server.exchange_engine_only(&frame(&echo)).unwrap();
        client.receive(&single(frames));
        assert_eq!(client.credits, 1);
    }
}
