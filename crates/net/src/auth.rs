//! The control channel's optional pre-shared key: the server sends a
//! random 32-byte nonce, the client answers HMAC-SHA256(key, context ||
//! nonce || direction). The key never crosses the wire; a recorded answer
//! is useless for another nonce.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tightlink_wire::control::Direction;

const CONTEXT: &[u8] = b"tightlink control v1";

pub fn answer(key: &[u8], nonce: &[u8; 32], direction: Direction) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(CONTEXT);
    mac.update(nonce);
    mac.update(&[direction as u8]);
    mac.finalize().into_bytes().into()
}

/// Checks an answer in constant time.
pub fn verify(key: &[u8], nonce: &[u8; 32], direction: Direction, got: &[u8; 32]) -> bool {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(CONTEXT);
    mac.update(nonce);
    mac.update(&[direction as u8]);
    mac.verify_slice(got).is_ok()
}

/// 32 bytes from the kernel's random source (getrandom(2)).
pub fn nonce() -> std::io::Result<[u8; 32]> {
    let mut b = [0u8; 32];
    let mut filled = 0;
    while filled < b.len() {
        // SAFETY: writes at most the remaining length into `b`.
        let r = unsafe {
            libc::getrandom(
                b[filled..].as_mut_ptr() as *mut libc::c_void,
                b.len() - filled,
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += r as usize;
        }
    }
    Ok(b)
}

/// Reads a key file: its bytes with surrounding whitespace trimmed; an
/// empty key is an error.
pub fn read_key_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let raw = std::fs::read(path)?;
    let start = raw.iter().position(|b| !b.is_ascii_whitespace());
    let end = raw.iter().rposition(|b| !b.is_ascii_whitespace());
    match (start, end) {
        (Some(s), Some(e)) => Ok(raw[s..=e].to_vec()),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: the key file is empty", path.display()),
        )),
    }
}

/// The key of STAMP's authenticated mode (RFC 8762 section 4.4):
/// HMAC-SHA-256, truncated to 16 bytes, over what each layout covers.
#[derive(Clone)]
pub struct StampKey {
    keyed: Hmac<Sha256>,
}

impl std::fmt::Debug for StampKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StampKey(..)")
    }
}

/// The shortest STAMP key taken: 16 bytes, the MAC's own length.
pub const STAMP_KEY_MIN_BYTES: usize = 16;

impl StampKey {
    pub fn new(key: &[u8]) -> StampKey {
        StampKey {
            keyed: Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length"),
        }
    }

    /// The MAC of the slices, in order.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; tightlink_wire::stamp_auth::HMAC_LEN] {
        let mut m = self.keyed.clone();
        for p in parts {
            m.update(p);
        }
        let full: [u8; 32] = m.finalize().into_bytes().into();
        let mut out = [0u8; tightlink_wire::stamp_auth::HMAC_LEN];
        out.copy_from_slice(&full[..tightlink_wire::stamp_auth::HMAC_LEN]);
        out
    }

    /// A STAMP key file: the key in hex (as `openssl rand -hex 32` writes
    /// it, the form other STAMP implementations read), whitespace around
    /// it ignored, at least 16 bytes.
    pub fn read_file(path: &std::path::Path) -> std::io::Result<StampKey> {
        let bad = |why: String| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {why}", path.display()),
            )
        };
        let text = read_key_file(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => e,
            _ => bad(e.to_string()),
        })?;
        let key = hex_decode(&text).ok_or_else(|| {
            bad("a STAMP key file holds the key in hex (e.g. `openssl rand -hex 32 > FILE`)".into())
        })?;
        if key.len() < STAMP_KEY_MIN_BYTES {
            return Err(bad(format!(
                "a STAMP key of {} bytes; at least {STAMP_KEY_MIN_BYTES} (32 hex digits)",
                key.len()
            )));
        }
        Ok(StampKey::new(&key))
    }
}

/// Hex digits, two a byte; `None` for anything else.
fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2 checks the HMAC itself ("Jefe").
    #[test]
    fn hmac_sha256_matches_rfc4231() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let out: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(out[..8], [0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e]);
    }

    #[test]
    fn answers_depend_on_key_nonce_and_direction() {
        let n = nonce().unwrap();
        let a = answer(b"secret", &n, Direction::Forward);
        assert!(verify(b"secret", &n, Direction::Forward, &a));
        assert!(!verify(b"Secret", &n, Direction::Forward, &a));
        assert!(!verify(b"secret", &n, Direction::Reverse, &a));
        let mut other = n;
        other[0] ^= 1;
        assert!(!verify(b"secret", &other, Direction::Forward, &a));
        assert_ne!(nonce().unwrap(), n);
    }

    #[test]
    fn stamp_keys_are_hex_of_16_bytes_or_more() {
        let dir = std::env::temp_dir().join(format!("tl-stampkey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k");
        std::fs::write(&f, "000102030405060708090a0b0c0d0e0f\n").unwrap();
        let k = StampKey::read_file(&f).unwrap();
        let want = StampKey::new(&(0u8..16).collect::<Vec<_>>());
        assert_eq!(k.mac(&[b"x"]), want.mac(&[b"x"]));
        // Parts are concatenated.
        assert_eq!(k.mac(&[b"ab", b"c"]), k.mac(&[b"abc"]));
        for (text, says) in [
            ("0001020304050607", "at least 16"),
            ("not hex at all, not hex at all!!", "in hex"),
            ("000", "in hex"),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = StampKey::read_file(&f).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("/k"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// RFC 4231 test case 2 again, truncated to STAMP's 16 bytes.
    #[test]
    fn the_stamp_mac_is_hmac_sha256_truncated() {
        let m = StampKey::new(b"Jefe").mac(&[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            m,
            [
                0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95,
                0x75, 0xc7
            ]
        );
    }
}
