//! The legacy ethtool ioctl (SIOCETHTOOL with an `ethtool_value`): read
//! and set offloads without the `ethtool` program. Command numbers from
//! `linux/ethtool.h`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Get/set generic receive offload.
pub const GGRO: u32 = 0x2b;
pub const SGRO: u32 = 0x2c;
/// Get/set TCP segmentation offload.
pub const GTSO: u32 = 0x1e;
pub const STSO: u32 = 0x1f;
/// Get/set generic segmentation offload.
pub const GGSO: u32 = 0x23;
pub const SGSO: u32 = 0x24;
/// Get the device flags (`FLAG_LRO` among them).
pub const GFLAGS: u32 = 0x25;
/// Large receive offload in the device flags.
pub const FLAG_LRO: u32 = 1 << 15;

const SIOCETHTOOL: libc::c_ulong = 0x8946;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

/// One ethtool command on `dev` (in the calling thread's namespace):
/// `data` in, the device's `data` out.
pub fn command(dev: &str, cmd: u32, data: u32) -> io::Result<u32> {
    if dev.len() >= 16 {
        return Err(io::Error::other(format!("interface name {dev} too long")));
    }
    // SAFETY: plain socket(2), owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut v = EthtoolValue { cmd, data };
    let mut req = IfReq {
        name: [0; 16],
        data: &mut v,
        _pad: [0; 16],
    };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: SIOCETHTOOL reads the ifreq and the ethtool_value it points
    // to, both alive for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("ethtool {dev} cmd {cmd:#x}: {e}"),
        ));
    }
    Ok(v.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_too_long_or_missing_are_errors() {
        let e = command("an-interface-name-too-long", GGRO, 0).unwrap_err();
        assert!(e.to_string().contains("too long"), "{e}");
        let e = command("tl-no-such0", GGRO, 0).unwrap_err();
        assert!(e.to_string().contains("tl-no-such0"), "{e}");
    }
}
