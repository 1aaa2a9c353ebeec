#!/bin/sh
# test-wire-rate.sh: how bench.sh's wire_gbps reads its samples of the veth
# pair (wire-rate.awk): the rate between 5 % and 95 % of the bytes; a run
# whose tool printed a rate of 0.000000 (ib_send_bw's client, after a
# complete run) keeps its wire rate when the pair carried the payload; a
# failed run (no figure of its own, too little on the pair) reads 0. No VM.
here=$(dirname "$0")
fail=0
expect() { # expect NAME WANT GOT
	if [ "$3" = "$2" ]; then echo "PASS: $1"; else echo "FAIL: $1: got '$3', want '$2'"; fail=1; fi
}
# samples every 0.2 s: 2.5e8 B at 1.25e8 B/s (1 Gb/s) from t = 1 to 3 s
samples() {
	awk 'BEGIN { for (i = 0; i <= 20; i++) { t = i * 0.2
		printf "%.1f %d\n", t, (t < 1 ? 0 : t > 3 ? 2.5e8 : (t - 1) * 1.25e8) } }'
}
rate() { samples | awk -v own="$1" -v want="$2" -f "$here/wire-rate.awk"; }
expect "a figure of its own: the wire rate" "1.0000" "$(rate 0.93 67108864)"
expect "0.000000 of its own, the payload (64 MiB x 3) on the pair: the wire rate" \
	"1.0000" "$(rate 0.000000 201326592)"
expect "0.000000 of its own, less than the payload on the pair: failed" "0" "$(rate 0.000000 268435456)"
expect "no figure of its own (the bare 0): failed" "0" "$(rate 0 67108864)"
expect "no output of its own at all: failed" "0" "$(rate '' 67108864)"
expect "nothing crossed: 0" "0" \
	"$(printf '0.0 5\n0.2 5\n0.4 5\n' | awk -v own=0.000000 -v want=0 -f "$here/wire-rate.awk")"
expect "no samples: 0" "0" "$(awk -v own=1 -v want=0 -f "$here/wire-rate.awk" /dev/null)"
# bench.sh reads its samples through this file, with want = count x size
# shellcheck disable=SC2016 # bench.sh's text, not expanded here
grep -q 'want=$(($(count "$3") \* $3)) -f "$here/wire-rate.awk"' "$here/bench.sh" ||
	{ echo "FAIL: bench.sh's wire_gbps does not read wire-rate.awk with the payload"; fail=1; }
exit $fail
