"""Build and install the uccl Python package (offline, no build isolation):

    pip install --no-build-isolation ./python

libuccl is found through pkg-config (an installed libuccl), or through
UCCL_INCLUDE_DIR / UCCL_LIB_DIR (for example an uninstalled build tree:
UCCL_LIB_DIR=build/ci/.libs; the headers default to ../include beside this
file). The extension uses the CPython C API only: no pybind11, nanobind or
Cython, so Debian's python3-dev and python3-setuptools are all it needs.
"""
import os
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["module.c", "errors.c", "engine.c", "mr.c", "order.c", "tensor.c", "prof.c", "bench.c",
           "conn.c", "conn_rma.c", "conn_many.c", "prep.c", "pgroup.c", "req.c", "args.c", "comm.c", "coll.c",
           "coll_call.c"]


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "uccl"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.split()


def library_flags():
    inc = os.environ.get("UCCL_INCLUDE_DIR")
    lib = os.environ.get("UCCL_LIB_DIR")
    if not inc and not lib:
        cflags, libs = pkg_config("--cflags"), pkg_config("--libs")
        if cflags is not None and libs is not None:
            return dict(
                include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
                library_dirs=[f[2:] for f in libs if f.startswith("-L")],
                runtime_library_dirs=[f[2:] for f in libs if f.startswith("-L")])
    inc = inc or os.path.join(HERE, "..", "include")
    flags = dict(include_dirs=[inc], library_dirs=[], runtime_library_dirs=[])
    if lib:
        lib = os.path.abspath(lib)
        flags["library_dirs"] = flags["runtime_library_dirs"] = [lib]
    return flags


setup(
    name="uccl",
    version="0.1.0",
    description="Python binding of libuccl (CPython C API)",
    packages=["uccl"],
    package_data={"uccl": ["*.pyi", "py.typed"]},
    ext_modules=[Extension(
        "uccl._uccl",
        sources=[os.path.join("src", s) for s in SOURCES],
        libraries=["uccl"],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
        **library_flags())],
)
