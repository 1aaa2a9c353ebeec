#!/bin/sh
# make check: examples/p2p_pingpong on two ranks
exec "$(dirname "$0")/run-np2.sh" examples/p2p_pingpong
