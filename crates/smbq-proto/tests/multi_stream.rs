//! smbq's multi-stream extension in the engine (docs/multistream.md): when the context is
//! answered (3), what a data stream may carry (5, 8), routing (5.3, 5.4), a reset stream's
//! requests (7.2) and the MessageIds a reset lost, given back with ECHOs (7.2). On simulated
//! time, without sockets; the smbq client's side of the negotiation is checked against the
//! same engine.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::client::{ClientConfig, negotiate_request, parse_negotiate_response};
use smbq_proto::engine::{Action, StreamId, Transport};
use smbq_proto::{Response, Violation};
use smbq_wire::{Command, Dialect, Header, NtStatus};

const DATA: StreamId = StreamId(1);

fn offer(streams: u16) -> Offer {
    let mut o = Offer::smb311(&[Cipher::Aes128Gcm], &[SigningAlgorithm::AesGmac]);
    o.data_streams = streams;
    o
}

/// A server engine on `transport` whose transport can carry `limit` data streams.
fn server(transport: Transport, limit: u16) -> Server {
    let mut s = Server::with_transport(config(), transport);
    s.engine.set_data_stream_limit(limit);
    s
}

fn granted(transport: Transport, limit: u16, asked: u16) -> (Server, Client, Negotiated) {
    let mut s = server(transport, limit);
    let mut c = Client::new(offer(asked));
    let n = c.negotiate(&mut s);
    (s, c, n)
}

/// A logged-on client granted 4 data streams over QUIC.
fn multi() -> (Server, Client) {
    let (mut s, mut c, n) = granted(Transport::Quic, 4, 4);
    assert_eq!(n.multi_stream.map(|m| m.streams), Some(4));
    let setup = c.session_setup(&mut s, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    c.tree_id = 5;
    (s, c)
}

/// A request whose body the engine does not look into.
fn request(c: &mut Client, command: Command) -> Vec<u8> {
    let h = c.header(command, 1);
    frame(&Client::message(&h, &[0u8; 32]))
}

#[test]
fn granted_over_quic_as_the_smaller_of_offer_and_limit() {
    let (s, _, n) = granted(Transport::Quic, 4, 8);
    assert_eq!(n.multi_stream.map(|m| (m.version, m.streams)), Some((1, 4)));
    assert_eq!(s.engine.granted_data_streams(), 4);
    let (s, _, n) = granted(Transport::Quic, 8, 2);
    assert_eq!(n.multi_stream.map(|m| m.streams), Some(2));
    assert_eq!(s.engine.granted_data_streams(), 2);
}

/// 3.1, 3.3: never over TCP, never when the server or its transport cannot (limit 0), never
/// to a client that did not offer (a Windows client, an older smbq).
#[test]
fn not_answered_over_tcp_without_a_limit_or_without_an_offer() {
    for (transport, limit, asked) in [
        (Transport::Tcp, 8, 4),
        (Transport::Quic, 0, 4),
        (Transport::Quic, 8, 0),
    ] {
        let (s, _, n) = granted(transport, limit, asked);
        assert_eq!(
            n.multi_stream, None,
            "{transport:?} limit {limit} asked {asked}"
        );
        assert_eq!(s.engine.granted_data_streams(), 0);
    }
}

/// 3.3: a context the server cannot take is ignored; the NEGOTIATE still succeeds.
#[test]
fn malformed_or_unknown_offers_are_ignored_not_failed() {
    for raw in [
        vec![1, 0, 4],                // too short
        vec![2, 0, 4, 0, 0, 0, 0, 0], // version 2
        vec![1, 0, 0, 0, 0, 0, 0, 0], // no streams
        vec![],
    ] {
        let mut s = server(Transport::Quic, 8);
        let mut o = offer(0);
        o.data_streams_raw = Some(raw.clone());
        let mut c = Client::new(o);
        let n = c.negotiate(&mut s);
        assert_eq!(n.dialect, Dialect::SMB3_1_1);
        assert_eq!(n.multi_stream, None, "{raw:?}");
        assert_eq!(s.engine.granted_data_streams(), 0);
    }
}

/// 8: a frame on a data stream of a connection granted none ends the connection.
#[test]
fn a_data_stream_without_a_grant_is_a_violation() {
    let (mut s, mut c, _) = granted(Transport::Quic, 0, 4);
    assert_eq!(
        c.session_setup(&mut s, USER, PASSWORD).status,
        NtStatus::SUCCESS
    );
    let wire = request(&mut c, Command::READ);
    assert_eq!(
        s.feed_on(DATA, &wire).err(),
        Some(Violation::DataStreamNotGranted)
    );
}

/// 5.1: NEGOTIATE, SESSION_SETUP, LOGOFF, ECHO, CANCEL and CHANGE_NOTIFY on a data stream end
/// the connection; the same requests on the control stream are fine.
#[test]
fn control_only_requests_on_a_data_stream_are_violations() {
    for command in [
        Command::NEGOTIATE,
        Command::SESSION_SETUP,
        Command::LOGOFF,
        Command::ECHO,
        Command::CANCEL,
        Command::CHANGE_NOTIFY,
    ] {
        let (mut s, mut c) = multi();
        let wire = request(&mut c, command);
        assert_eq!(
            s.feed_on(DATA, &wire).err(),
            Some(Violation::ControlOnly(command)),
            "{command:?}"
        );
    }
    let (mut s, mut c) = multi();
    let echo = c.echo(true);
    let (frames, _) = s.exchange_engine_only(&frame(&echo)).unwrap();
    assert_eq!(c.receive(&single(frames)).one().status(), NtStatus::SUCCESS);
}

/// 6: streams share the one credit window; requests on two streams in any MessageId order.
#[test]
fn streams_share_one_message_id_space_in_any_order() {
    let (mut s, mut c) = multi();
    let first = request(&mut c, Command::READ);
    let second = request(&mut c, Command::READ);
    // The later id arrives first, on another stream.
    let a = s.feed_on(StreamId(2), &second).unwrap();
    let b = s.feed_on(DATA, &first).unwrap();
    assert_eq!(executes(&a).len() + executes(&b).len(), 2);
    // An id used on one stream cannot be used again on another.
    let mut again = c.header(Command::READ, 1);
    again.message_id -= 2;
    let replayed = frame(&Client::message(&again, &[0u8; 32]));
    assert!(matches!(
        s.feed_on(StreamId(3), &replayed),
        Err(Violation::BadMessageId(_))
    ));
}

/// 7.2: a reset data stream's running request is cancelled; one waiting in its chain is
/// answered CANCELLED; requests of other streams run on; the stream owes nothing afterwards.
#[test]
fn a_reset_stream_cancels_its_requests_and_only_its_own() {
    let (mut s, mut c) = multi();
    let mid = c.next_mid;
    let chain = {
        let h1 = c.header(Command::READ, 1);
        let h2 = c.header(Command::READ, 1);
        let m1 = Client::message(&h1, &[0u8; 32]);
        let m2 = Client::message(&h2, &[0u8; 32]);
        frame(&c.compound(vec![(m1, false), (m2, false)]))
    };
    let running = executes(&s.feed_on(DATA, &chain).unwrap())
        .iter()
        .map(|r| r.header.message_id)
        .collect::<Vec<_>>();
    assert_eq!(running, [mid], "a chain runs one request at a time");
    let other = c.next_mid;
    let on_other = s
        .feed_on(StreamId(2), &request(&mut c, Command::READ))
        .unwrap();
    assert_eq!(executes(&on_other).len(), 1);
    assert!(s.engine.stream_busy(DATA));

    s.engine.cancel_stream(DATA);
    let cancels: Vec<u64> = s
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::Cancel { message_id, .. } => Some(message_id),
            _ => None,
        })
        .collect();
    assert_eq!(cancels, [mid], "only the reset stream's running request");

    // The server answers the cancelled request; the one waiting behind it is not run.
    s.complete(mid, Response::error(NtStatus::CANCELLED));
    assert!(
        executes(&s.actions()).is_empty(),
        "the waiting request is not run"
    );
    let sent = s.sent_with_streams();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].0, DATA,
        "the responses still go on the reset stream"
    );
    let statuses: Vec<NtStatus> = c
        .receive(&sent[0].1)
        .msgs
        .iter()
        .map(|m| m.status())
        .collect();
    assert_eq!(statuses, [NtStatus::CANCELLED, NtStatus::CANCELLED]);
    assert!(!s.engine.stream_busy(DATA));
    assert!(s.engine.stream_busy(StreamId(2)));

    s.complete(other, Response::ok(vec![0; 16]));
    s.actions();
    let sent = s.sent_with_streams();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, StreamId(2));
}

/// 7.2: MessageIds a reset lost (never received) are given back with an ECHO of the same
/// MessageId and CreditCharge on the control stream, which returns their credits; the ids are
/// then used, so the same id cannot come again.
#[test]
fn lost_message_ids_are_given_back_by_an_echo_with_the_same_charge() {
    let (mut s, mut c) = multi();
    // A 2-credit request sent on a data stream and lost in its reset.
    let lost: Header = c.header(Command::READ, 2);
    let mut echo = Header {
        command: Command::ECHO,
        message_id: lost.message_id,
        credit_charge: 2,
        credits: 2,
        session_id: c.session_id,
        ..Default::default()
    };
    let before = c.credits;
    let (frames, _) = s
        .exchange_engine_only(&frame(&Client::message(&echo, &[4, 0, 0, 0])))
        .unwrap();
    let r = c.receive(&single(frames));
    assert_eq!(r.one().status(), NtStatus::SUCCESS);
    assert!(r.one().header.credits >= 2, "the ECHO returns the credits");
    assert!(c.credits >= before + 2);
    // The connection goes on past the lost ids.
    let wire = request(&mut c, Command::READ);
    assert_eq!(executes(&s.feed_on(DATA, &wire).unwrap()).len(), 1);
    // And the lost ids are spent.
    echo.credit_charge = 1;
    assert!(matches!(
        s.feed(&frame(&Client::message(&echo, &[4, 0, 0, 0]))),
        Err(Violation::BadMessageId(_))
    ));
}

/// The smbq client's side (docs/multistream.md 3, rule 5) against the engine: granted
/// within the offer, nothing from a server that does not answer, and an answer it did not ask
/// for (or beyond its offer) refused.
#[test]
fn the_smbq_client_takes_a_grant_and_refuses_an_unasked_one() {
    let exchange = |limit: u16, asked: u16| {
        let mut s = server(Transport::Quic, limit);
        let cfg = ClientConfig {
            data_streams: asked,
            ..ClientConfig::default()
        };
        let req = negotiate_request(&cfg, &Header::default(), &[7; 32]);
        let (frames, _) = s.exchange_engine_only(&frame(&req)).unwrap();
        single(frames)[4..].to_vec()
    };
    let cfg = |asked: u16| ClientConfig {
        data_streams: asked,
        ..ClientConfig::default()
    };
    let n = parse_negotiate_response(&cfg(3), &exchange(8, 3)).unwrap();
    assert_eq!(n.data_streams, 3);
    // An older server (no answer): one stream.
    let n = parse_negotiate_response(&cfg(3), &exchange(0, 3)).unwrap();
    assert_eq!(n.data_streams, 0);
    // An answer to an offer we did not make, or beyond ours.
    let granted_four = exchange(8, 4);
    assert!(parse_negotiate_response(&cfg(0), &granted_four).is_err());
    assert!(parse_negotiate_response(&cfg(2), &granted_four).is_err());
}

/// 5.1, 5.3: a request on a data stream goes async there (interim and final response on
/// it); a CANCEL for it on the control stream, by its AsyncId, reaches it.
#[test]
fn async_responses_stay_on_their_stream_and_cancel_comes_over_the_control_stream() {
    let (mut s, mut c) = multi();
    let mid = c.next_mid;
    let wire = request(&mut c, Command::LOCK);
    assert_eq!(executes(&s.feed_on(DATA, &wire).unwrap()).len(), 1);
    s.advance(smbq_proto::engine::INTERIM_AFTER);
    let interim = s.sent_with_streams();
    assert_eq!(interim.len(), 1);
    assert_eq!(
        interim[0].0, DATA,
        "the interim response goes on the request's stream"
    );
    let received = c.receive(&interim[0].1);
    let m = received.one();
    assert_eq!(m.status(), NtStatus::PENDING);
    let async_id = m
        .header
        .async_id
        .expect("an interim response carries an AsyncId");

    let cancel = Header {
        command: Command::CANCEL,
        message_id: 0,
        async_id: Some(async_id),
        session_id: c.session_id,
        tree_id: c.tree_id,
        ..Default::default()
    };
    let mut msg = Client::message(&cancel, &[4, 0, 0, 0]);
    c.sign(&mut msg);
    let actions = s.feed(&frame(&msg)).unwrap();
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Cancel { message_id, .. } if *message_id == mid)),
        "{actions:?}"
    );
    s.complete(mid, Response::error(NtStatus::CANCELLED));
    s.actions();
    let fin = s.sent_with_streams();
    assert_eq!(fin.len(), 1);
    assert_eq!(
        fin[0].0, DATA,
        "the final response goes on the request's stream"
    );
    let received = c.receive(&fin[0].1);
    assert_eq!(received.one().status(), NtStatus::CANCELLED);
}
