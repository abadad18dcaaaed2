//! Network interfaces: which one holds an address, and interface
//! indexes by name.

use std::ffi::CString;
use std::io;
use std::net::IpAddr;

/// The interface that holds `ip`, if any.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let mut found = None;
    // SAFETY: getifaddrs gives a list we only read and then free.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut p = list;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                let fam = (*a).sa_family as i32;
                let this = if fam == libc::AF_INET {
                    let s = &*(a as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(s.sin_addr.s_addr).to_be_bytes()))
                } else if fam == libc::AF_INET6 {
                    let s = &*(a as *const libc::sockaddr_in6);
                    Some(IpAddr::from(s.sin6_addr.s6_addr))
                } else {
                    None
                };
                if this == Some(ip) {
                    found = Some(
                        std::ffi::CStr::from_ptr((*p).ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}

/// The index of interface `name` (in the calling thread's namespace).
pub fn index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("interface {name:?}")))?;
    // SAFETY: a NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("interface {name}: {e}")));
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_address_and_name() {
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert!(interface_of("192.0.2.77".parse().unwrap()).is_none());
        assert!(index("lo").unwrap() >= 1);
        assert!(index("tl-no-such0")
            .unwrap_err()
            .to_string()
            .contains("tl-no-such0"));
    }
}
