//! Addresses as users type them: `HOST[:PORT]`, IPv6 with or without
//! brackets, the default port added where none is given.

use std::net::SocketAddr;

/// `HOST[:PORT]` with the server's default port added where none is given
/// (`::1` and `[::1]` are hosts; `[::1]:9` has a port).
pub fn with_default_port(server: &str) -> String {
    with_port(server, crate::DEFAULT_PORT)
}

/// `HOST[:PORT]` with `default` added where no port is given.
pub fn with_port(server: &str, default: u16) -> String {
    if server.parse::<SocketAddr>().is_ok() {
        return server.to_string();
    }
    if server.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{server}]:{default}");
    }
    if server.starts_with('[') && server.ends_with(']') {
        return format!("{server}:{default}");
    }
    match server.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => {
            server.to_string()
        }
        _ => format!("{server}:{default}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_port_is_added_only_where_missing() {
        let p = crate::DEFAULT_PORT;
        assert_eq!(with_default_port("10.0.0.1"), format!("10.0.0.1:{p}"));
        assert_eq!(with_default_port("10.0.0.1:9"), "10.0.0.1:9");
        assert_eq!(
            with_default_port("host.example"),
            format!("host.example:{p}")
        );
        assert_eq!(with_default_port("host.example:80"), "host.example:80");
        assert_eq!(with_default_port("::1"), format!("[::1]:{p}"));
        assert_eq!(with_default_port("[::1]"), format!("[::1]:{p}"));
        assert_eq!(with_default_port("[::1]:9"), "[::1]:9");
    }
}
