#!/bin/sh
# make check: examples/one_sided_write on two ranks
exec "$(dirname "$0")/run-np2.sh" examples/one_sided_write
