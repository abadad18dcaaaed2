//! tightlink-sys: the Linux system layer under the real-packet crates
//! (net, lab, capture): clocks, CPU time stolen by a hypervisor, socket options and waiting, the ethtool
//! ioctl, AF_PACKET sockets, interface lookups and stop signals. Each call is checked
//! and its error says what failed; nothing here knows about probes.

pub mod clock;
pub mod cpu_time;
pub mod ethtool;
pub mod netif;
pub mod packet;
pub mod signal;
pub mod sockopt;
