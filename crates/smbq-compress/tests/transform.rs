//! The compression transform end to end: what one end compresses the other decompresses,
//! and every hostile input of issue 36 item 5 is refused before it costs memory.

use smbq_compress::{Algorithm, Compression, DecompressError, MIN_RUN};
use smbq_wire::compression::{ChainedPayload, CompressionHeader, PatternV1, flags};
use smbq_wire::cursor::Writer;
use smbq_wire::negotiate::{CompressionAlgorithm as Id, compression_flags};

const LIMIT: usize = (8 << 20) + 256;

fn conn(algs: &[Algorithm], chained: bool) -> Compression {
    let offered: Vec<Id> = algs.iter().map(|a| a.wire()).collect();
    let f = if chained {
        compression_flags::CHAINED
    } else {
        compression_flags::NONE
    };
    Compression::settle(algs, &offered, f)
}

/// An SMB2 header-like prefix (it starts with 0xFE 'SMB', as a decompressed message must).
fn prefix() -> Vec<u8> {
    let mut p = vec![0xFE, b'S', b'M', b'B'];
    p.resize(80, 7);
    p
}

fn text(n: usize) -> Vec<u8> {
    let words = b"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod ";
    words.iter().copied().cycle().take(n).collect()
}

fn random(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn whole(p: &[u8], d: &[u8]) -> Vec<u8> {
    [p, d].concat()
}

#[test]
fn chained_and_unchained_round_trip_with_every_algorithm() {
    let general = Algorithm::ALL.into_iter().filter(|a| a.is_general());
    for a in general {
        assert!(a.available(), "{a} is built in");
        for chained in [false, true] {
            let c = conn(&[a, Algorithm::PatternV1], chained);
            // Text, and text with zero runs inside (not at the ends: no Pattern_V1).
            let mut mixed = text(100_000);
            mixed.extend(vec![0u8; 70_000]);
            mixed.extend(text(100_001));
            for d in [text(256 * 1024), mixed] {
                let p = prefix();
                let out = c.compress(&p, &d).expect("text compresses");
                assert!(
                    out.message.len() < d.len() / 5,
                    "{a}: {}",
                    out.message.len()
                );
                assert_eq!(out.algorithm, a);
                assert_eq!(
                    c.decompress(&out.message, LIMIT).unwrap(),
                    whole(&p, &d),
                    "{a}"
                );
            }
        }
    }
}

#[test]
fn runs_at_either_end_go_as_pattern_v1() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let p = prefix();
    let mut d = vec![0u8; 100_000];
    d.extend(text(5000));
    d.extend(vec![0xAA; 3 * MIN_RUN]);
    let out = c.compress(&p, &d).unwrap();
    assert_eq!(c.decompress(&out.message, LIMIT).unwrap(), whole(&p, &d));
    // NONE (prefix), Pattern_V1, LZ4, Pattern_V1.
    let (_, mut rest) = CompressionHeader::decode(&out.message).unwrap();
    let mut kinds = Vec::new();
    while !rest.is_empty() {
        let (pl, next) = ChainedPayload::decode(rest).unwrap();
        kinds.push(pl.algorithm);
        rest = next;
    }
    assert_eq!(kinds, [Id::NONE, Id::PATTERN_V1, Id::LZ4, Id::PATTERN_V1]);

    // All zeros: one Pattern_V1 payload does it.
    let zeros = vec![0u8; 1 << 20];
    let out = c.compress(&p, &zeros).unwrap();
    assert_eq!(out.algorithm, Algorithm::PatternV1);
    assert!(out.message.len() < 128);
    assert_eq!(
        c.decompress(&out.message, LIMIT).unwrap(),
        whole(&p, &zeros)
    );
}

#[test]
fn random_data_goes_out_uncompressed() {
    for chained in [false, true] {
        let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], chained);
        assert!(c.compress(&prefix(), &random(1 << 20, 7)).is_none());
        assert!(c.compress(&prefix(), &random(4000, 9)).is_none());
    }
}

#[test]
fn settle_keeps_the_servers_order_and_pattern_only_when_chained() {
    let ours = [Algorithm::Lz4, Algorithm::PatternV1];
    let c = Compression::settle(
        &ours,
        &[Id::PATTERN_V1, Id::LZ4],
        compression_flags::CHAINED,
    );
    assert_eq!(c.algorithms(), &ours);
    assert!(c.chained());
    let c = Compression::settle(&ours, &[Id::PATTERN_V1, Id::LZ4], compression_flags::NONE);
    assert_eq!(c.algorithms(), &[Algorithm::Lz4]);
    let c = Compression::settle(&ours, &[Id::PATTERN_V1], compression_flags::NONE);
    assert!(!c.is_on());
    assert_eq!(c.response(), (compression_flags::NONE, vec![Id::NONE]));
    let c = Compression::settle(&ours, &[Id::LZNT1, Id(0x99)], compression_flags::CHAINED);
    assert!(!c.is_on() && !c.chained());
}

#[test]
fn the_client_refuses_an_answer_it_did_not_offer() {
    let ours = [Algorithm::Lz4, Algorithm::PatternV1];
    assert!(Compression::accept(&ours, true, 1, &[Id::LZ77]).is_err());
    assert!(Compression::accept(&ours, true, 1, &[]).is_err());
    assert!(Compression::accept(&ours, false, 1, &[Id::LZ4]).is_err());
    assert!(Compression::accept(&ours, true, 0, &[Id::PATTERN_V1]).is_err());
    assert!(
        !Compression::accept(&ours, true, 0, &[Id::NONE])
            .unwrap()
            .is_on()
    );
    let c = Compression::accept(&ours, true, 1, &[Id::LZ4, Id::PATTERN_V1]).unwrap();
    assert!(c.chained() && c.is_on());
}

// --- hostile input (issue 36 item 5) ------------------------------------------------------

fn unchained(alg: Id, original: u32, offset: u32, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    CompressionHeader::Unchained {
        original_size: original,
        algorithm: alg,
        offset,
    }
    .encode(&mut w);
    w.bytes(body);
    w.into_vec()
}

fn chained(original: u32, payloads: &[(Id, Option<u32>, Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new();
    CompressionHeader::Chained {
        original_size: original,
    }
    .encode(&mut w);
    for (i, (alg, orig, data)) in payloads.iter().enumerate() {
        let f = if i == 0 { flags::CHAINED } else { flags::NONE };
        ChainedPayload::encode_header(&mut w, *alg, f, *orig, data.len() as u32);
        w.bytes(data);
    }
    w.into_vec()
}

fn pattern(b: u8, n: u32) -> Vec<u8> {
    let mut w = Writer::new();
    PatternV1 {
        pattern: b,
        repetitions: n,
    }
    .encode(&mut w);
    w.into_vec()
}

#[test]
fn nothing_is_accepted_before_compression_is_negotiated() {
    let off = Compression::default();
    let msg = chained(80, &[(Id::NONE, None, prefix())]);
    assert_eq!(
        off.decompress(&msg, LIMIT),
        Err(DecompressError::NotNegotiated)
    );
    // Chained when only unchained was negotiated.
    let c = conn(&[Algorithm::Lz4], false);
    assert_eq!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::NotNegotiated)
    );
}

#[test]
fn an_algorithm_not_negotiated_is_refused_pattern_v1_included() {
    let c = conn(&[Algorithm::Lz4], true);
    let msg = chained(
        80 + 64,
        &[
            (Id::NONE, None, prefix()),
            (Id::PATTERN_V1, None, pattern(0, 64)),
        ],
    );
    assert_eq!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::AlgorithmNotNegotiated(4))
    );
    let msg = unchained(Id::LZNT1, 10, 0, &[0; 10]);
    assert_eq!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::AlgorithmNotNegotiated(1))
    );
    // Pattern_V1 negotiated, but an unchained message cannot carry it.
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let msg = unchained(Id::PATTERN_V1, 64, 0, &pattern(0, 64));
    assert!(matches!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Malformed(_))
    ));
    // NONE as the unchained algorithm.
    let msg = unchained(Id::NONE, 80, 0, &prefix());
    assert!(c.decompress(&msg, LIMIT).is_err());
}

#[test]
fn the_declared_size_is_checked_against_the_limit_before_allocating() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let preauth = 64 * 1024;
    let msg = chained(u32::MAX, &[(Id::NONE, None, prefix())]);
    assert_eq!(
        c.decompress(&msg, preauth),
        Err(DecompressError::TooLarge {
            size: u32::MAX as u64,
            limit: preauth
        })
    );
    // Offset + OriginalCompressedSegmentSize together, without overflow.
    let msg = unchained(Id::LZ4, u32::MAX, u32::MAX, &[]);
    assert!(matches!(
        c.decompress(&msg, preauth),
        Err(DecompressError::TooLarge { .. })
    ));
}

#[test]
fn the_decompressed_size_must_equal_the_declared_size() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let p = prefix();
    for declared in [79u32, 81, 0] {
        let msg = chained(declared, &[(Id::NONE, None, p.clone())]);
        assert_eq!(
            c.decompress(&msg, LIMIT),
            Err(DecompressError::SizeMismatch)
        );
    }
    // An LZ4 payload whose OriginalPayloadSize is not what it decodes to.
    let d = text(10_000);
    let lz = lz4(&d);
    for claimed in [9_999u32, 10_001] {
        let msg = chained(
            80 + claimed,
            &[
                (Id::NONE, None, p.clone()),
                (Id::LZ4, Some(claimed), lz.clone()),
            ],
        );
        assert_eq!(
            c.decompress(&msg, LIMIT),
            Err(DecompressError::Corrupt(Algorithm::Lz4))
        );
    }
    // Unchained, declared one byte short.
    let msg = unchained(Id::LZ4, 9_999, 80, &[p.clone(), lz].concat());
    assert!(c.decompress(&msg, LIMIT).is_err());
}

#[test]
fn chained_lengths_and_offsets_are_checked() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let mut msg = chained(80, &[(Id::NONE, None, prefix())]);
    // Length one past the end.
    msg[12] += 1;
    assert!(matches!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Malformed(_))
    ));
    // A trailing partial payload header.
    let mut msg = chained(80, &[(Id::NONE, None, prefix())]);
    msg.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Malformed(_))
    ));
    // An unchained Offset past the end.
    let msg = unchained(Id::LZ4, 10, 1000, &prefix());
    assert!(matches!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Malformed(_))
    ));
    // Shorter than a header.
    assert!(
        c.decompress(&[0xFC, b'S', b'M', b'B', 0, 0], LIMIT)
            .is_err()
    );
    // A Pattern_V1 payload of the wrong length.
    let msg = chained(
        80 + 8,
        &[
            (Id::NONE, None, prefix()),
            (Id::PATTERN_V1, None, vec![0; 9]),
        ],
    );
    assert!(matches!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Malformed(_))
    ));
}

#[test]
fn decompression_bombs_stay_within_the_declared_size() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    // 4 GiB of one byte in 8 bytes, over a 1 MiB declaration: refused before it is written.
    let msg = chained(
        1 << 20,
        &[
            (Id::NONE, None, prefix()),
            (Id::PATTERN_V1, None, pattern(0, u32::MAX)),
        ],
    );
    assert_eq!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::SizeMismatch)
    );
    // Many patterns, each within the declaration, together past it.
    let mut payloads = vec![(Id::NONE, None, prefix())];
    payloads.extend((0..100).map(|_| (Id::PATTERN_V1, None, pattern(1, 1 << 20))));
    let msg = chained(8 << 20, &payloads);
    assert_eq!(
        c.decompress(&msg, 16 << 20),
        Err(DecompressError::SizeMismatch)
    );
    // An LZ4 stream that expands 250x, declared smaller than it expands.
    let zeros = vec![0u8; 4 << 20];
    let lz = lz4(&zeros);
    assert!(lz.len() < (4 << 20) / 200);
    let msg = chained(
        80 + (1 << 20),
        &[(Id::NONE, None, prefix()), (Id::LZ4, Some(1 << 20), lz)],
    );
    assert_eq!(
        c.decompress(&msg, LIMIT),
        Err(DecompressError::Corrupt(Algorithm::Lz4))
    );
}

#[test]
fn encryption_inside_compression_is_refused() {
    let c = conn(&[Algorithm::Lz4, Algorithm::PatternV1], true);
    let mut inner = vec![0xFD, b'S', b'M', b'B'];
    inner.resize(120, 0);
    let msg = chained(120, &[(Id::NONE, None, inner)]);
    assert_eq!(c.decompress(&msg, LIMIT), Err(DecompressError::NotSmb2));
}

fn lz4(d: &[u8]) -> Vec<u8> {
    // The transform's own LZ4, through an unchained message of empty prefix.
    let c = conn(&[Algorithm::Lz4], false);
    let mut p = vec![0xFE, b'S', b'M', b'B'];
    p.truncate(0);
    let out = c.compress(&p, d).expect("compressible");
    out.message[16..].to_vec()
}
