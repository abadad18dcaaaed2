#!/usr/bin/env bash
# Documented check (issue 6): probe packets are TWAMP-light test packets
# that Wireshark decodes. Captures a loopback estimate with tshark (Debian:
# apt-get install tshark), finds the session's UDP port by tightlink's
# "TLNK" magic, decodes that port as TWAMP-Test and prints the first
# packets' sequence numbers. Exits non-zero if nothing decodes. Root (or
# capture rights) needed.
set -euo pipefail
bin=${TIGHTLINK:-target/release/tightlink}
pcap=$(mktemp --suffix .pcap)
"$bin" server --bind 127.0.0.1 --port 17499 2>/dev/null & server=$!
timeout 10 tshark -i lo -f "udp and greater 100" -c 2000 -w "$pcap" 2>/dev/null & cap=$!
trap 'kill $server $cap 2>/dev/null || true; rm -f "$pcap"' EXIT
sleep 2
"$bin" estimate 127.0.0.1:17499 --max-rate 100M --method prcmt >/dev/null
sleep 1; kill $cap 2>/dev/null || true; wait $cap 2>/dev/null || true
port=$(tshark -r "$pcap" -Y 'udp contains "TLNK"' -T fields -e udp.dstport 2>/dev/null | sort | uniq -c | sort -rn | head -1 | awk '{print $2}')
[ -n "$port" ] || { echo "no tightlink probe captured"; exit 1; }
out=$(tshark -r "$pcap" -d "udp.port==$port,twamp.test" 2>/dev/null | grep -c "TWAMP-Test" || true)
echo "UDP port $port: $out packets decoded as TWAMP-Test"
tshark -r "$pcap" -d "udp.port==$port,twamp.test" -T fields -e frame.number -e twamp.test.seq_number -e twamp.test.timestamp 2>/dev/null | awk -F"\t" -v n=0 '$2 != "" && n<5 {print "frame", $1, "sequence", $2, "timestamp", $3; n++}'
[ "$out" -gt 0 ]
