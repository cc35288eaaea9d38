//! Microsoft Open Specifications blog, "Encryption in SMB 3.0: A protocol perspective"
//! (2012-10-05): SMB 3.0 key derivation from a session key and AES-128-CCM encryption of
//! WRITE/READ requests and responses.
//! https://learn.microsoft.com/en-us/archive/blogs/openspecification/encryption-in-smb-3-0-a-protocol-perspective
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_crypto::{
    Cipher, DIALECT_3_0, DIALECT_3_0_2, Role, Sealer, TRANSFORM_HEADER_LEN, derive_keys,
};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

const SESSION_KEY: &str = "B4546771B515F766A86735532DD6C4F0";
const SIGNING_KEY: &str = "F773CD23C18FD1E08EE510CADA7CF852";
/// Named from the client's side, as in the blog: its EncryptionKey is "ServerIn " (C2S).
const CLIENT_ENCRYPTION_KEY: &str = "261B72350558F2E9DCF613070383EDBF";
const CLIENT_DECRYPTION_KEY: &str = "8FE2B57EC34D2DB5B1A9727F526BBDB5";
const APPLICATION_KEY: &str = "77432F808CE99156B5BC6A3676D730D1";

#[test]
fn key_derivation_both_roles_and_302() {
    for dialect in [DIALECT_3_0, DIALECT_3_0_2] {
        let sk = h(SESSION_KEY);
        let client =
            derive_keys(dialect, Role::Client, &sk, None, Some(Cipher::Aes128Ccm)).unwrap();
        assert_eq!(client.signing_key().to_vec(), h(SIGNING_KEY));
        assert_eq!(client.application_key().to_vec(), h(APPLICATION_KEY));
        assert_eq!(client.encryption_key().unwrap(), h(CLIENT_ENCRYPTION_KEY));
        assert_eq!(client.decryption_key().unwrap(), h(CLIENT_DECRYPTION_KEY));
        let server =
            derive_keys(dialect, Role::Server, &sk, None, Some(Cipher::Aes128Ccm)).unwrap();
        assert_eq!(server.encryption_key().unwrap(), h(CLIENT_DECRYPTION_KEY));
        assert_eq!(server.decryption_key().unwrap(), h(CLIENT_ENCRYPTION_KEY));
        // 3.0.x ignores a preauth hash if one is passed.
        let with_hash = derive_keys(dialect, Role::Server, &sk, Some(&[7; 64]), None).unwrap();
        assert_eq!(with_hash.signing_key().to_vec(), h(SIGNING_KEY));
    }
}

struct Sealed {
    plain: &'static str,
    transformed: &'static str,
}

const REQUESTS: [Sealed; 2] = [
    Sealed {
        // WRITE "Smb3 encryption testing"
        plain: "
FE534D4240000100000000000900400008000000000000000400000000000000
FFFE0000010000001100001400E4080000000000000000000000000000000000
3100700017000000000000000000000015010000390000020100000039020000
00000000000000007000000000000000536D623320656E6372797074696F6E20
74657374696E67",
        transformed: "
FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A
744DA3EE87000000000001001100001400E4080025C8FEE16605A437832D1CD5
2DA9F4645333482A175FE5384563F45FCDAFAEF38BC62BA4D5C62897996625A4
4C29BE5658DE2E6117585779E7B59FFD971278D08580D7FA899E410E910EABF5
AA1DB43050B33B49182637759AC15D84BFCDF5B6B238993C0F4CF4D6012023F6
C627297075D84B7803912D0A9639634453595EF3E33FFE4E7AC2AB",
    },
    Sealed {
        // READ
        plain: "
FE534D4240000100000000000800400008000000000000000500000000000000
FFFE0000010000001100001400E4080000000000000000000000000000000000
3100000017000000000000000000000015010000390000020100000039020000
0000000000000000000000000000000000",
        transformed: "
FD534D42E93601498B76D6F7A72D5EF9B6C79FAFA5123A25F983E245983F413B
8B429AF271000000000001001100001400E408009A464F709AA663F8C2FC3907
D63CBF6F98B1E3DD649ED366009FD0B40A365224718E5440E053F6E01AE462FD
B721BF91C3A6E52E14F9EFF005F445761289FF1272908B52754C8FCB949F228A
C104A66204289A205BCBC47509D04AF9A907002B96863358B3B7CBA5E3779300
74FCDF3550",
    },
];

const RESPONSES: [Sealed; 2] = [
    Sealed {
        // WRITE response
        plain: "
FE534D4240000100000000000900210009000000000000000400000000000000
FFFE0000010000001100001400E4080000000000000000000000000000000000
11000000170000000000000000000000",
        transformed: "
FD534D42A6015530A18F6D9AFFE22AFAE8E66484860000000000000011000014
00E4080050000000000001001100001400E40800DBF46435C5F14169293CE079
E344479BF670227E49873F458672C3098DAC467DD5809F369D67409166515787
1483E01F7BECD02064EAC3E235F913668BBC2F097980D4B378F1993EFF6E60D1
77309E5B",
    },
    Sealed {
        // READ response carrying "Smb3 encryption testing"
        plain: "
FE534D4240000100000000000800210009000000000000000500000000000000
FFFE0000010000001100001400E4080000000000000000000000000000000000
11005000170000000000000000000000536D623320656E6372797074696F6E20
74657374696E67",
        transformed: "
FD534D42ABD518B68C2F04D7879F482B689EB83F870000000000000011000014
00E4080067000000000001001100001400E40800493D6FE2BDBEB435CF5F5469
70C7BB57BF20E713C75A3D045507E0D68E5C0346659D6FFB8AC1504A786CA2BB
89C9E7FE4F313E910A04180D2D0EA7DF636329E5A3285984500EF86FE9D55DA4
FAB9531CFDD4C551D47F3C73124BB4590A45052B694048B991CCF5",
    },
];

fn check(sealer: &Sealer, opener: &Sealer, v: &Sealed) {
    let plain = h(v.plain);
    let transformed = h(v.transformed);
    let (hdr, ct) = transformed.split_at(TRANSFORM_HEADER_LEN);
    let published_hdr: [u8; TRANSFORM_HEADER_LEN] = hdr.try_into().unwrap();

    let mut hdr = published_hdr;
    hdr[4..20].fill(0);
    let mut buf = plain.clone();
    sealer.seal_transform(&mut hdr, &mut buf).unwrap();
    assert_eq!(hdr, published_hdr);
    assert_eq!(buf, ct);

    let mut buf = ct.to_vec();
    opener.open_transform(&published_hdr, &mut buf).unwrap();
    assert_eq!(buf, plain);

    let mut bad = ct.to_vec();
    bad[ct.len() / 3] ^= 0x10;
    assert!(opener.open_transform(&published_hdr, &mut bad).is_err());
    // CCM leaves no unauthenticated plaintext behind.
    assert!(bad.iter().all(|&b| b == 0));
}

#[test]
fn aes128_ccm_requests_and_responses() {
    let sk = h(SESSION_KEY);
    let client = derive_keys(
        DIALECT_3_0,
        Role::Client,
        &sk,
        None,
        Some(Cipher::Aes128Ccm),
    )
    .unwrap();
    let server = derive_keys(
        DIALECT_3_0,
        Role::Server,
        &sk,
        None,
        Some(Cipher::Aes128Ccm),
    )
    .unwrap();
    for v in &REQUESTS {
        check(
            &client.encryptor().unwrap(),
            &server.decryptor().unwrap(),
            v,
        );
    }
    for v in &RESPONSES {
        check(
            &server.encryptor().unwrap(),
            &client.decryptor().unwrap(),
            v,
        );
    }
}
