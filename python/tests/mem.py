"""Memory kinds the tests move: host numpy arrays by default, or GPU memory
when UCCL_PY_TEST_MEM names one ("torch": torch CUDA tensors, "cupy": CuPy
arrays; tests/gpu/run-device.sh sets it on the device machine). new() makes a
buffer of the kind holding a numpy array's bytes, host() copies one back."""
import os

import numpy as np

KIND = os.environ.get("UCCL_PY_TEST_MEM", "numpy")
GPU = KIND in ("torch", "cupy")

if KIND == "torch":
    import torch
    torch.cuda.set_device(int(os.environ.get("UCCL_PY_TEST_GPU", "0")))
elif KIND == "cupy":
    import cupy
    cupy.cuda.Device(int(os.environ.get("UCCL_PY_TEST_GPU", "0"))).use()
elif KIND != "numpy":
    raise SystemExit("UCCL_PY_TEST_MEM=%s: numpy, torch or cupy" % KIND)


def new(a):
    """A buffer of this kind with the bytes of numpy uint8 array a."""
    a = np.ascontiguousarray(a, dtype=np.uint8)
    if KIND == "torch":
        t = torch.from_numpy(a.copy()).cuda()
        torch.cuda.synchronize()
        return t
    if KIND == "cupy":
        x = cupy.asarray(a)
        cupy.cuda.Device().synchronize()
        return x
    return a.copy()


def zeros(n):
    return new(np.zeros(n, np.uint8))


def host(x):
    """The bytes of buffer x as a numpy uint8 array (after the GPU is done)."""
    if KIND == "torch":
        torch.cuda.synchronize()
        return x.cpu().numpy()
    if KIND == "cupy":
        cupy.cuda.Device().synchronize()
        return cupy.asnumpy(x)
    return np.asarray(x)
