//! Just enough SMB2 NEGOTIATE to probe a server by hand: build a 3.1.1 request, read back the
//! dialect and the negotiate contexts of the response.

/// MS-SMB2 2.2.3.1: negotiate context types used here.
pub const PREAUTH_INTEGRITY: u16 = 0x0001;
pub const ENCRYPTION: u16 = 0x0002;
pub const TRANSPORT_CAPABILITIES: u16 = 0x0006;
/// MS-SMB2 2.2.3.1.5: SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY.
pub const ACCEPT_TRANSPORT_LEVEL_SECURITY: u32 = 0x0000_0001;

const HEADER_LEN: usize = 64;

/// MS-SMB2 2.2.1.2: a sync request header for `command` with message id `mid`.
fn header(command: u16, mid: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(b"\xfeSMB");
    h.extend_from_slice(&64u16.to_le_bytes()); // StructureSize
    h.extend_from_slice(&0u16.to_le_bytes()); // CreditCharge
    h.extend_from_slice(&0u32.to_le_bytes()); // Status
    h.extend_from_slice(&command.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // CreditRequest
    h.extend_from_slice(&0u32.to_le_bytes()); // Flags
    h.extend_from_slice(&0u32.to_le_bytes()); // NextCommand
    h.extend_from_slice(&mid.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes()); // Reserved (ProcessId)
    h.extend_from_slice(&0u32.to_le_bytes()); // TreeId
    h.extend_from_slice(&0u64.to_le_bytes()); // SessionId
    h.extend_from_slice(&[0u8; 16]); // Signature
    h
}

fn pad8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

fn context(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    pad8(out);
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(data);
}

/// MS-SMB2 2.2.3: NEGOTIATE offering only 3.1.1, with preauth integrity (SHA-512),
/// AES-128-GCM, and optionally SMB2_TRANSPORT_CAPABILITIES(ACCEPT_TRANSPORT_LEVEL_SECURITY).
/// Returns the SMB2 message without the 4-byte transport header.
pub fn request(transport_caps: bool, client_guid: [u8; 16], salt: [u8; 32]) -> Vec<u8> {
    let mut m = header(0, 0);
    let count: u16 = if transport_caps { 3 } else { 2 };
    // Fixed part is 36 bytes, then one dialect, padded to 8: contexts start at 64+36+2+2.
    let ctx_offset: u32 = (HEADER_LEN + 36 + 2 + 2) as u32;
    m.extend_from_slice(&36u16.to_le_bytes()); // StructureSize
    m.extend_from_slice(&1u16.to_le_bytes()); // DialectCount
    m.extend_from_slice(&1u16.to_le_bytes()); // SecurityMode: signing enabled
    m.extend_from_slice(&0u16.to_le_bytes()); // Reserved
    m.extend_from_slice(&0u32.to_le_bytes()); // Capabilities
    m.extend_from_slice(&client_guid);
    m.extend_from_slice(&ctx_offset.to_le_bytes());
    m.extend_from_slice(&count.to_le_bytes());
    m.extend_from_slice(&0u16.to_le_bytes()); // Reserved2
    m.extend_from_slice(&0x0311u16.to_le_bytes());
    pad8(&mut m);
    debug_assert_eq!(m.len(), ctx_offset as usize);

    let mut preauth = Vec::new();
    preauth.extend_from_slice(&1u16.to_le_bytes()); // HashAlgorithmCount
    preauth.extend_from_slice(&(salt.len() as u16).to_le_bytes());
    preauth.extend_from_slice(&1u16.to_le_bytes()); // SHA-512
    preauth.extend_from_slice(&salt);
    context(&mut m, PREAUTH_INTEGRITY, &preauth);
    let mut enc = Vec::new();
    enc.extend_from_slice(&1u16.to_le_bytes()); // CipherCount
    enc.extend_from_slice(&2u16.to_le_bytes()); // AES-128-GCM
    context(&mut m, ENCRYPTION, &enc);
    if transport_caps {
        context(
            &mut m,
            TRANSPORT_CAPABILITIES,
            &ACCEPT_TRANSPORT_LEVEL_SECURITY.to_le_bytes(),
        );
    }
    m
}

/// Prefixes the MS-SMB2 2.1 Direct TCP transport header (also used over QUIC).
pub fn frame(msg: &[u8]) -> Vec<u8> {
    let mut f = (msg.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(msg);
    f
}

#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u32,
    pub dialect: u16,
    /// (type, data) of each negotiate context, in order.
    pub contexts: Vec<(u16, Vec<u8>)>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// MS-SMB2 2.2.4: parses a NEGOTIATE response (SMB2 message, no transport header).
pub fn parse_response(m: &[u8]) -> Result<Response, String> {
    let bad = |what: &str| format!("malformed NEGOTIATE response: {what}");
    if m.get(..4) != Some(b"\xfeSMB".as_slice()) {
        return Err(bad("not an SMB2 header"));
    }
    let command = u16_at(m, 12).ok_or_else(|| bad("short header"))?;
    if command != 0 {
        return Err(bad(&format!("command {command}")));
    }
    let status = u32_at(m, 8).ok_or_else(|| bad("short header"))?;
    let body = HEADER_LEN;
    let dialect = u16_at(m, body + 4).ok_or_else(|| bad("short body"))?;
    let count = u16_at(m, body + 6).ok_or_else(|| bad("short body"))?;
    let mut at = u32_at(m, body + 60).ok_or_else(|| bad("short body"))? as usize;
    let mut contexts = Vec::new();
    if dialect == 0x0311 {
        for _ in 0..count {
            at = at.next_multiple_of(8);
            let kind = u16_at(m, at).ok_or_else(|| bad("context header"))?;
            let len = u16_at(m, at + 2).ok_or_else(|| bad("context header"))? as usize;
            let data = m
                .get(at + 8..at + 8 + len)
                .ok_or_else(|| bad("context data"))?;
            contexts.push((kind, data.to_vec()));
            at += 8 + len;
        }
    }
    Ok(Response {
        status,
        dialect,
        contexts,
    })
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a request back with independent offsets (MS-SMB2 2.2.3 field layout).
    #[test]
    fn request_layout_matches_the_spec_offsets() {
        let m = request(true, [7; 16], [9; 32]);
        assert_eq!(&m[..4], b"\xfeSMB");
        assert_eq!(u16_at(&m, 12), Some(0)); // NEGOTIATE
        assert_eq!(u16_at(&m, 64), Some(36));
        assert_eq!(u16_at(&m, 66), Some(1));
        assert_eq!(&m[76..92], &[7; 16]);
        let off = u32_at(&m, 92).unwrap() as usize;
        assert_eq!(off, 104);
        assert_eq!(u16_at(&m, 96), Some(3));
        assert_eq!(u16_at(&m, 100), Some(0x0311));
        // First context: preauth, 38 bytes of data.
        assert_eq!(u16_at(&m, off), Some(1));
        assert_eq!(u16_at(&m, off + 2), Some(38));
        // 104 + 8 + 38 = 150 -> 152: encryption; 152 + 12 = 164 -> 168: transport caps.
        assert_eq!(u16_at(&m, 152), Some(2));
        assert_eq!(u16_at(&m, 168), Some(6));
        assert_eq!(u32_at(&m, 176), Some(1));
        assert_eq!(m.len(), 180);
        assert_eq!(request(false, [0; 16], [0; 32]).len(), 164);
    }

    /// A response assembled field by field parses back to its dialect and contexts.
    #[test]
    fn parses_a_response_with_contexts() {
        let mut m = header(0, 0);
        m[14] = 1;
        let mut body = vec![0u8; 64];
        body[0] = 65;
        body[4..6].copy_from_slice(&0x0311u16.to_le_bytes());
        body[6..8].copy_from_slice(&2u16.to_le_bytes());
        body[60..64].copy_from_slice(&128u32.to_le_bytes());
        m.extend_from_slice(&body);
        assert_eq!(m.len(), 128);
        context(&mut m, TRANSPORT_CAPABILITIES, &1u32.to_le_bytes());
        context(&mut m, ENCRYPTION, &[1, 0, 2, 0]);
        let r = parse_response(&m).unwrap();
        assert_eq!(r.dialect, 0x0311);
        assert_eq!(r.status, 0);
        assert_eq!(
            r.contexts,
            vec![(6, vec![1, 0, 0, 0]), (2, vec![1, 0, 2, 0])]
        );
        // Truncations never panic and are reported.
        for cut in 0..m.len() {
            let _ = parse_response(&m[..cut]);
        }
        assert!(parse_response(&m[..m.len() - 1]).is_err());
    }

    #[test]
    fn frame_prefixes_a_big_endian_length() {
        assert_eq!(frame(&[1, 2, 3]), vec![0, 0, 0, 3, 1, 2, 3]);
    }
}
