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
}
