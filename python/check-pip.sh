#!/bin/sh
# make check: the offline install the README gives, pip install
# --no-build-isolation ./python, against this build's libuccl
# (UCCL_LIB_DIR=.libs), from a copy of python/ and include/ (pip builds in
# the tree it is given), into a temporary --target; then the installed
# package imports, registers a numpy array and packs its descriptor. SKIP
# (77) without pip, setuptools or wheel.
if [ "${uccl_python_built:-}" != yes ]; then
    echo "SKIP: the Python binding is not built (configure found no Python headers)"
    exit 77
fi
py=${PYTHON:-python3}
for m in pip setuptools wheel numpy; do
    if ! "$py" -c "import $m" >/dev/null 2>&1; then
        echo "SKIP: $py cannot import $m (Debian: apt-get install python3-$m)"
        exit 77
    fi
done
srcdir=${top_srcdir:-.} builddir=${top_builddir:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp -R "$srcdir/python" "$srcdir/include" "$tmp/src/" || exit 1
rm -rf "$tmp/src/python/build" "$tmp/src/python/uccl/_uccl"*.so "$tmp/src/python/uccl/.libs"
libdir=$(cd "$builddir/.libs" && pwd)
if ! UCCL_LIB_DIR=$libdir timeout 600 "$py" -m pip install -q --no-build-isolation --no-deps --no-cache-dir \
    --no-index --target "$tmp/t" "$tmp/src/python" >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"
    echo "FAIL: pip install --no-build-isolation ./python"
    exit 1
fi
preload=
if ldd "$libdir/libuccl.so" 2>/dev/null | grep -q libasan; then # a sanitizer build, as run-python.sh
    preload=$(${CC:-cc} -print-file-name=libasan.so)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    export ASAN_OPTIONS
fi
PYTHONPATH=$tmp/t LD_PRELOAD=$preload "$py" - <<'PY' || { echo "FAIL: the pip-installed package"; exit 1; }
import os
import numpy as np
import uccl
assert uccl.__file__.startswith(os.environ["PYTHONPATH"]), uccl.__file__
assert os.path.exists(os.path.join(os.path.dirname(uccl.__file__), "__init__.pyi"))
a = np.arange(4096, dtype=np.uint8)
with uccl.Engine(transports="shm") as e:
    with e.register(a) as m:
        assert m.nbytes == 4096 and m.ptr == a.ctypes.data
        assert len(m.descriptor()) == 64
print("pip-installed uccl %s: %s" % (uccl.version(), uccl.__file__))
PY
echo "PASS: pip install --no-build-isolation ./python, then import, register, descriptor"
