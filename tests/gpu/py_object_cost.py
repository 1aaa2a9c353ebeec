"""What a torch CUDA tensor costs to read as an object, call by call, in one
process (no MPI): the interfaces the binding may ask (DLPack's handshake,
the CUDA array interface) against torch's C-level methods and raw current
stream (the binding's fast path, python/src/tensor.c). Prints us per call,
median of 5 runs of N calls each. With uccl importable (session 12): the
binding's producer-stream step alone, uccl_stream_query timed in a C loop
(uccl._uccl._stream_query_cost), idle and busy streams. Run on the device:
python3 this.py"""
import statistics
import time

import torch

N = 2000


def per_call(fn):
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        runs.append((time.perf_counter() - t0) / N * 1e6)
    return statistics.median(runs)


def main():
    t = torch.zeros(4096, dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    dflt = torch.cuda.default_stream()
    raw = torch._C._cuda_getCurrentRawStream
    cases = [
        ("t.__dlpack_device__()", lambda: t.__dlpack_device__()),
        ("t.__dlpack__(stream=1) (capsule dropped)", lambda: t.__dlpack__(stream=1)),
        ("t.__cuda_array_interface__", lambda: t.__cuda_array_interface__),
        ("torch.cuda.current_stream()", lambda: torch.cuda.current_stream()),
        ("torch._C._cuda_getCurrentRawStream(0)", lambda: raw(0)),
        ("t.data_ptr()", lambda: t.data_ptr()),
        ("t.nbytes", lambda: t.nbytes),
        ("t.is_contiguous()", lambda: t.is_contiguous()),
        ("t.is_cuda", lambda: t.is_cuda),
        ("t.requires_grad", lambda: t.requires_grad),
        ("t.get_device()", lambda: t.get_device()),
        ("t.is_conj()", lambda: t.is_conj()),
        ("t._version", lambda: t._version),
        # what uccl_stream_event asks first (cudaStreamQuery), idle streams
        ("torch.cuda.default_stream().query()", lambda: dflt.query()),
        ("side stream .query()", lambda: side.query()),
        ("torch.cuda.current_stream()", lambda: torch.cuda.current_stream()),
        ("side.cuda_stream (what stream= reads)", lambda: side.cuda_stream),
    ]
    print("torch %s, %s; us per call (median of 5 x %d)" % (
        torch.__version__, torch.cuda.get_device_name(0), N))
    for name, fn in cases:
        print("%-45s %8.3f" % (name, per_call(fn)))
    with torch.cuda.stream(side):
        print("%-45s %8.3f" % ("t.__dlpack__(stream=1), side stream current",
                               per_call(lambda: t.__dlpack__(stream=1))))
    query_floor(side)


def query_floor(side):
    """uccl_stream_query in C, n calls in a row (no Python per call)."""
    try:
        import uccl
    except ImportError as e:
        print("uccl not importable (%s): no uccl_stream_query row" % e)
        return
    with uccl.Engine(gpu=0) as e:
        cost = uccl._uccl._stream_query_cost
        for name, s in (("default (legacy) stream", 0), ("side stream", side.cuda_stream)):
            print("%-45s %8.3f" % ("uccl_stream_query, %s, idle (C)" % name,
                                   min(cost(e, s, N) for _ in range(5)) * 1e6))
        x = torch.zeros(1 << 26, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(side):
            for _ in range(20):
                x.add_(1)  # milliseconds of work queued
            busy = cost(e, side.cuda_stream, 200) * 1e6
        side.synchronize()
        print("%-45s %8.3f" % ("uccl_stream_query, side stream, busy (C)", busy))


if __name__ == "__main__":
    main()
