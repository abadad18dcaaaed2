#!/usr/bin/env bash
# Documented check: probe packets are TWAMP-light test packets
# that Wireshark decodes, and `tightlink reflector`'s replies are TWAMP
# reflector packets it decodes too. Root (or capture rights) and tshark
# (Debian: apt-get install tshark) needed. Exits non-zero if nothing
# decodes.
#
# 1. A loopback estimate against `tightlink server`: finds the session's
#    UDP port by tightlink's "TLNK" magic, decodes it as TWAMP-Test and
#    prints the first packets' sequence numbers.
# 2. `estimate twamp:` against `tightlink reflector`: every reply decodes
#    with a receive timestamp, the sender's sequence number and TTL.
set -euo pipefail
bin=${TIGHTLINK:-target/release/tightlink}
pcap=$(mktemp --suffix .pcap)
pcap2=$(mktemp --suffix .pcap)
"$bin" server --bind 127.0.0.1 --port 17499 2>/dev/null & server=$!
"$bin" reflector --bind 127.0.0.1 --port 17498 2>/dev/null & reflector=$!
timeout 10 tshark -i lo -f "udp and greater 100 and not port 17498" -c 2000 -w "$pcap" 2>/dev/null & cap=$!
trap 'kill $server $reflector $cap 2>/dev/null || true; rm -f "$pcap" "$pcap2"' EXIT
sleep 2
"$bin" estimate 127.0.0.1:17499 --max-rate 100M --method prcmt >/dev/null
sleep 1; kill $cap 2>/dev/null || true; wait $cap 2>/dev/null || true
port=$(tshark -r "$pcap" -Y 'udp contains "TLNK"' -T fields -e udp.dstport 2>/dev/null | sort | uniq -c | sort -rn | head -1 | awk '{print $2}')
[ -n "$port" ] || { echo "no tightlink probe captured"; exit 1; }
out=$(tshark -r "$pcap" -d "udp.port==$port,twamp.test" 2>/dev/null | grep -c "TWAMP-Test" || true)
echo "server: UDP port $port: $out packets decoded as TWAMP-Test"
tshark -r "$pcap" -d "udp.port==$port,twamp.test" -T fields -e frame.number -e twamp.test.seq_number -e twamp.test.timestamp 2>/dev/null | awk -F"\t" -v n=0 '$2 != "" && n<5 {print "frame", $1, "sequence", $2, "timestamp", $3; n++}'
[ "$out" -gt 0 ]

timeout 10 tshark -i lo -f "udp port 17498" -c 4000 -w "$pcap2" 2>/dev/null & cap=$!
sleep 2
"$bin" estimate twamp:127.0.0.1:17498 --max-rate 100M --method prcmt >/dev/null
sleep 1; kill $cap 2>/dev/null || true; wait $cap 2>/dev/null || true
sent=$(tshark -r "$pcap2" -Y "udp.dstport==17498" 2>/dev/null | wc -l)
replies=$(tshark -r "$pcap2" -d "udp.port==17498,twamp.test" -Y "udp.srcport==17498 && twamp.test.receive_timestamp && twamp.test.sender_ttl==64" 2>/dev/null | wc -l)
echo "reflector: $sent test packets, $replies replies decoded as TWAMP-Test reflector packets (receive timestamp, sender TTL 64)"
tshark -r "$pcap2" -d "udp.port==17498,twamp.test" -Y "udp.srcport==17498" -T fields -e frame.number -e twamp.test.sender_seq_number -e twamp.test.receive_timestamp 2>/dev/null | awk -F"\t" -v n=0 'n<3 {print "frame", $1, "sender sequence", $2, "received", $3; n++}'
[ "$replies" -gt 0 ] && [ "$replies" -eq "$sent" ]
