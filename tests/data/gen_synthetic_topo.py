#!/usr/bin/env python3
"""Writes the synthetic hwloc 2.x XML topologies of tests/unit/test_topo.c.

Run from tests/data: python3 gen_synthetic_topo.py. The output is committed;
this script documents how each machine is built. Each socket has 4 PUs, one
NUMA node; PCI trees are built from ('hb'|'bridge'|'gpu'|'nic'|'net') tuples.
"""

gp = [1]


def next_gp():
    gp[0] += 1
    return gp[0]


def bridge_obj(kind, busid, children, depth, ind):
    lo, hi = 0x10, 0xfe  # bus ranges are not checked by hwloc for XML imports
    if kind == "hb":
        head = (f'<object type="Bridge" gp_index="{next_gp()}" bridge_type="0-1" depth="0" '
                f'bridge_pci="0000:[{lo:02x}-{hi:02x}]">')
    else:
        head = (f'<object type="Bridge" gp_index="{next_gp()}" bridge_type="1-1" depth="{depth}" '
                f'bridge_pci="0000:[{lo:02x}-{hi:02x}]" pci_busid="{busid}" '
                f'pci_type="0604 [10b5:c010] [0000:0000] 00" pci_link_speed="31.5">')
    out = [ind + head]
    for c in children:
        out += node(c, depth + 1, ind + "  ")
    out.append(ind + "</object>")
    return out


def node(spec, depth, ind):
    kind = spec[0]
    if kind in ("hb", "bridge"):
        return bridge_obj(kind, spec[1], spec[2], depth, ind)
    busid = spec[1]
    if kind == "gpu":
        out = [ind + f'<object type="PCIDev" gp_index="{next_gp()}" pci_busid="{busid}" '
               f'pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="31.5">',
               ind + '  <info name="PCIVendor" value="NVIDIA Corporation"/>',
               ind + '  <info name="PCIDevice" value="GH100 [H100 SXM5 80GB]"/>',
               ind + f'  <object type="OSDev" gp_index="{next_gp()}" name="{spec[2]}" '
               'subtype="CUDA" osdev_type="5"/>',
               ind + "</object>"]
        return out
    if kind == "nic":  # ('nic', busid, ibname, netname, [port states])
        out = [ind + f'<object type="PCIDev" gp_index="{next_gp()}" pci_busid="{busid}" '
               f'pci_type="0207 [15b3:1021] [15b3:0041] 00" pci_link_speed="31.5">',
               ind + '  <info name="PCIVendor" value="Mellanox Technologies"/>',
               ind + '  <info name="PCIDevice" value="MT2910 Family [ConnectX-7]"/>',
               ind + f'  <object type="OSDev" gp_index="{next_gp()}" name="{spec[3]}" osdev_type="2">',
               ind + '    <info name="Port" value="1"/>',
               ind + "  </object>",
               ind + f'  <object type="OSDev" gp_index="{next_gp()}" name="{spec[2]}" osdev_type="3">']
        for i, st in enumerate(spec[4]):
            out.append(ind + f'    <info name="Port{i + 1}State" value="{st}"/>')
        out += [ind + "  </object>", ind + "</object>"]
        return out
    raise ValueError(kind)


def package(os_index, pcitree, ind="    "):
    cpus = 0xF << (4 * os_index)
    out = [ind + f'<object type="Package" gp_index="{next_gp()}" os_index="{os_index}" '
           f'cpuset="0x{cpus:08x}" complete_cpuset="0x{cpus:08x}" '
           f'nodeset="0x{1 << os_index:x}" complete_nodeset="0x{1 << os_index:x}">',
           ind + f'  <object type="NUMANode" gp_index="{next_gp()}" os_index="{os_index}" '
           f'cpuset="0x{cpus:08x}" complete_cpuset="0x{cpus:08x}" nodeset="0x{1 << os_index:x}" '
           f'complete_nodeset="0x{1 << os_index:x}" local_memory="68719476736"/>']
    for c in range(4):
        pu = 4 * os_index + c
        out += [ind + f'  <object type="Core" gp_index="{next_gp()}" os_index="{c}" '
                f'cpuset="0x{1 << pu:08x}" complete_cpuset="0x{1 << pu:08x}" '
                f'nodeset="0x{1 << os_index:x}" complete_nodeset="0x{1 << os_index:x}">',
                ind + f'    <object type="PU" gp_index="{next_gp()}" os_index="{pu}" '
                f'cpuset="0x{1 << pu:08x}" complete_cpuset="0x{1 << pu:08x}" '
                f'nodeset="0x{1 << os_index:x}" complete_nodeset="0x{1 << os_index:x}"/>',
                ind + "  </object>"]
    for t in pcitree:
        out += node(t, 0, ind + "  ")
    out.append(ind + "</object>")
    return out


def machine(name, packages):
    gp[0] = 1
    n = len(packages)
    cpus = (1 << (4 * n)) - 1
    nodes = (1 << n) - 1
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
           '<topology version="2.0">',
           f'  <object type="Machine" gp_index="1" os_index="0" cpuset="0x{cpus:08x}" '
           f'complete_cpuset="0x{cpus:08x}" allowed_cpuset="0x{cpus:08x}" nodeset="0x{nodes:x}" '
           f'complete_nodeset="0x{nodes:x}" allowed_nodeset="0x{nodes:x}">',
           f'    <info name="HostName" value="{name}"/>']
    for i, p in enumerate(packages):
        out += package(i, p)
    out += ["  </object>", "</topology>", ""]
    return "\n".join(out)


def bus(b, dev=0, fn=0):
    return f"0000:{b:02x}:{dev:02x}.{fn}"


def switch_pair(root_bus, gpu, nic, nicdown=False):
    """Host bridge -> root port -> switch (upstream + 2 downstream): GPU | NIC."""
    b = root_bus
    st = [1] if nicdown else [4]
    return ("hb", None, [("bridge", bus(b, 1), [("bridge", bus(b + 1), [
        ("bridge", bus(b + 2), [("gpu", bus(b + 3), f"cuda{gpu}")]),
        ("bridge", bus(b + 2, 1), [("nic", bus(b + 4), f"mlx5_{nic}", f"ibp{b + 4}s0", st)]),
    ])])])


def dgx(nicdown=None):
    socks = []
    for s in range(2):
        socks.append([switch_pair(0x10 + 0x40 * s + 0x10 * k, 4 * s + k, 4 * s + k,
                                  nicdown == 4 * s + k) for k in range(4)])
    return socks


def more_gpus_than_nics():
    # One root port -> big switch U: 4 GPUs and 2 NICs on its downstream
    # ports, and GPU 4 behind a second switch hanging off U.
    down = [("bridge", bus(0x12, d), [("gpu", bus(0x20 + d), f"cuda{d}")]) for d in range(4)]
    down += [("bridge", bus(0x12, 4 + k), [("nic", bus(0x30 + k), f"mlx5_{k}", f"ib{k}", [4])])
             for k in range(2)]
    down.append(("bridge", bus(0x12, 8), [("bridge", bus(0x40), [
        ("bridge", bus(0x41), [("gpu", bus(0x42), "cuda4")])])]))
    return [[("hb", None, [("bridge", bus(0x10, 1), [("bridge", bus(0x11), down)])])]]


def nics_one_socket():
    # Socket 0: host bridge A with GPUs 0 and 1, host bridge B with both NICs
    # (mlx5_1: port 1 down, port 2 active). Socket 1: GPUs 2 and 3, no NIC.
    s0 = [("hb", None, [("bridge", bus(0x10, k), [("gpu", bus(0x11 + k), f"cuda{k}")])
                        for k in range(2)]),
          ("hb", None, [("bridge", bus(0x20, 1), [("nic", bus(0x21), "mlx5_0", "ib0", [4])]),
                        ("bridge", bus(0x20, 2), [("nic", bus(0x22), "mlx5_1", "ib1", [1, 4])])])]
    s1 = [("hb", None, [("bridge", bus(0x90, k), [("gpu", bus(0x91 + k), f"cuda{2 + k}")])
                        for k in range(2)])]
    return [s0, s1]


if __name__ == "__main__":
    for name, pk in [("synth-dgx-h100", dgx()), ("synth-dgx-h100-nicdown", dgx(nicdown=2)),
                     ("synth-more-gpus-than-nics", more_gpus_than_nics()),
                     ("synth-nics-one-socket", nics_one_socket())]:
        with open(f"{name}.xml", "w") as f:
            f.write(machine(name, pk))
