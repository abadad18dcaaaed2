#!/usr/bin/env python3
"""A plain STAMP session-reflector in user space, written for tightlink's
tests: unauthenticated mode (RFC 8762 section 4.3.1), receive stamps taken
with the system clock after recvfrom() returns, as many small reflectors
do. It holds no trains, so tightlink measures only toward it.

    python3 scripts/stamp-reflector.py [ADDRESS] [PORT]    # 0.0.0.0 8620
"""

import socket
import struct
import sys
import time

NTP_EPOCH_OFFSET = 2208988800  # seconds from 1900-01-01 to 1970-01-01


def ntp_now() -> bytes:
    t = time.time_ns()
    seconds, ns = divmod(t, 1_000_000_000)
    return struct.pack("!II", seconds + NTP_EPOCH_OFFSET, (ns << 32) // 1_000_000_000)


def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "0.0.0.0"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8620
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((address, port))
    seq = 0
    while True:
        data, peer = sock.recvfrom(9216)
        received = ntp_now()
        if len(data) < 44:
            continue  # shorter than an unauthenticated test packet
        # Sequence number, timestamp, error estimate (S=1: synchronised
        # to an external source is not claimed; multiplier 1), MBZ,
        # receive timestamp, then the sender's sequence number,
        # timestamp and error estimate, MBZ, the sender's TTL, MBZ.
        reply = (
            struct.pack("!I", seq)
            + ntp_now()
            + b"\x00\x01"
            + b"\x00\x00"
            + received
            + data[0:4]
            + data[4:12]
            + data[12:14]
            + b"\x00\x00"
            + b"\x40"
            + b"\x00\x00\x00"
        )
        # The reply is as long as the test packet (RFC 8762 section 4.3).
        reply += data[len(reply):]
        seq = (seq + 1) & 0xFFFFFFFF
        sock.sendto(reply, peer)


if __name__ == "__main__":
    main()
