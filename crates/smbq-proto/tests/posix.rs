//! SMB2_POSIX_EXTENSIONS_AVAILABLE (the SMB3 POSIX extensions' negotiate context, 0x100;
//! smbq_wire::posix): answered with the tag, byte for byte, when a tag in the client's data
//! is it and the server has the extensions; ignored otherwise; data that is not whole
//! 16-byte tags fails the NEGOTIATE with INVALID_PARAMETER (Samba's rules).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_wire::NtStatus;
use smbq_wire::posix::TAG;

fn offer(data: &[u8]) -> Offer {
    let mut o = Offer::smb311(&[Cipher::Aes128Gcm], &[SigningAlgorithm::AesCmac]);
    o.posix = Some(data.to_vec());
    o
}

fn server(on: bool) -> Server {
    let mut cfg = config();
    cfg.posix_extensions = on;
    Server::new(cfg)
}

#[test]
fn the_tag_is_answered_with_itself() {
    let n = Client::new(offer(&TAG)).negotiate(&mut server(true));
    assert_eq!(n.posix.as_deref(), Some(&TAG[..]));
    // One of several tags is enough.
    let n = Client::new(offer(&[[7u8; 16], TAG].concat())).negotiate(&mut server(true));
    assert_eq!(n.posix.as_deref(), Some(&TAG[..]));
}

#[test]
fn nothing_is_answered_without_the_tag_or_the_extensions() {
    assert_eq!(
        Client::new(offer(&TAG)).negotiate(&mut server(false)).posix,
        None
    );
    assert_eq!(
        Client::new(offer(&[7u8; 16]))
            .negotiate(&mut server(true))
            .posix,
        None
    );
    assert_eq!(
        Client::new(offer(&[])).negotiate(&mut server(true)).posix,
        None
    );
}

#[test]
fn data_that_is_not_whole_tags_fails_the_negotiate() {
    let mut client = Client::new(offer(&TAG[..5]));
    let req = client.negotiate_request();
    let (frames, _) = server(true).exchange_engine_only(&frame(&req)).unwrap();
    assert_eq!(
        client.receive(&frames[0]).one().status(),
        NtStatus::INVALID_PARAMETER
    );
    // A server without the extensions does not look at it.
    let mut client = Client::new(offer(&TAG[..5]));
    assert_eq!(client.negotiate(&mut server(false)).posix, None);
}
