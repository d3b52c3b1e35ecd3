//! Just enough ONC RPC (RFC 5531) for lmbench's lat_rpc: a null procedure call and its reply,
//! XDR-encoded with AUTH_NONE credentials, and TCP record marking. Fixed-size buffers only, so
//! a forked server may use it.

/// An unassigned number from the "defined by user" range 0x20000000-0x3fffffff.
pub const PROGRAM: u32 = 0x2000_4850;
pub const VERSION: u32 = 1;
/// xid, CALL, rpcvers, prog, vers, proc, cred (flavor, length), verf (flavor, length).
pub const CALL_LEN: usize = 40;
/// xid, REPLY, MSG_ACCEPTED, verf (flavor, length), SUCCESS.
pub const REPLY_LEN: usize = 24;

const CALL: u32 = 0;
const REPLY: u32 = 1;
const RPC_VERSION: u32 = 2;
const NULL_PROC: u32 = 0;
const AUTH_NONE: u32 = 0;
const MSG_ACCEPTED: u32 = 0;
const SUCCESS: u32 = 0;
const LAST_FRAGMENT: u32 = 1 << 31;

fn put(out: &mut [u8], words: &[u32]) {
    for (chunk, w) in out.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_be_bytes());
    }
}

fn word(msg: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        msg.get(i * 4..i * 4 + 4)?.try_into().ok()?,
    ))
}

pub fn encode_call(xid: u32, out: &mut [u8; CALL_LEN]) {
    let words = [
        xid,
        CALL,
        RPC_VERSION,
        PROGRAM,
        VERSION,
        NULL_PROC,
        AUTH_NONE,
        0,
        AUTH_NONE,
        0,
    ];
    put(out, &words);
}

/// The xid of a well-formed null call to our program, else None.
pub fn decode_call(msg: &[u8]) -> Option<u32> {
    let expect = [CALL, RPC_VERSION, PROGRAM, VERSION, NULL_PROC, AUTH_NONE, 0];
    let ok = msg.len() == CALL_LEN
        && expect
            .iter()
            .enumerate()
            .all(|(i, &w)| word(msg, i + 1) == Some(w));
    ok.then(|| word(msg, 0)).flatten()
}

pub fn encode_reply(xid: u32, out: &mut [u8; REPLY_LEN]) {
    put(out, &[xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, SUCCESS]);
}

/// The xid of an accepted, successful reply, else None.
pub fn decode_reply(msg: &[u8]) -> Option<u32> {
    let expect = [REPLY, MSG_ACCEPTED, AUTH_NONE, 0, SUCCESS];
    let ok = msg.len() == REPLY_LEN
        && expect
            .iter()
            .enumerate()
            .all(|(i, &w)| word(msg, i + 1) == Some(w));
    ok.then(|| word(msg, 0)).flatten()
}

/// The record mark of a one-fragment TCP record of `len` bytes.
pub fn record_mark(len: usize) -> [u8; 4] {
    (LAST_FRAGMENT | len as u32).to_be_bytes()
}

/// The length of the fragment a record mark announces, if it is the last (only) one.
pub fn fragment_len(mark: [u8; 4]) -> Option<usize> {
    let mark = u32::from_be_bytes(mark);
    (mark & LAST_FRAGMENT != 0).then_some((mark & !LAST_FRAGMENT) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_and_reply_round_trip_through_xdr() {
        let mut call = [0; CALL_LEN];
        encode_call(0xdead_beef, &mut call);
        assert_eq!(&call[..8], &[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);
        assert_eq!(decode_call(&call), Some(0xdead_beef));
        call[23] = 1; // procedure 1 is not the null procedure
        assert_eq!(decode_call(&call), None);

        let mut reply = [0; REPLY_LEN];
        encode_reply(7, &mut reply);
        assert_eq!(decode_reply(&reply), Some(7));
        assert_eq!(decode_reply(&reply[..20]), None);
        assert_eq!(fragment_len(record_mark(40)), Some(40));
        assert_eq!(fragment_len(40u32.to_be_bytes()), None);
    }
}
