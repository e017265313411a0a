#!/usr/bin/env python3
"""Which OpenBLAS kernel ("core") a benchmark side runs, and which this CPU's best is.

    blas_kernels.py lib PATH      the core OpenBLAS library PATH picks in this environment
    blas_kernels.py torch         the OpenBLAS that torch's sgemm calls go to (run it with the
                                  LD_LIBRARY_PATH torch_ref.py gets) and the core it picks
    blas_kernels.py binary PATH   the OpenBLAS a program (e.g. anuvad_bench) is linked against

Prints one JSON object: {"lib": path or null, "core": name or null, "config": ..., "error": ...}.
Run under `env -u OPENBLAS_CORETYPE` the core is OpenBLAS's own choice for this CPU (DYNAMIC_ARCH),
i.e. the best kernel this library has for it; `isa_level` ranks a core name by the instruction
set its kernels use, for comparing with the CPU's (run_vs_torch.sh, summarize.py).
"""
import ctypes
import json
import os
import re
import subprocess
import sys

# OpenBLAS 0.3.21 x86-64 core names by the widest instruction set their SGEMM kernels use.
CORE_ISA = {
    "sapphirerapids": 4, "cooperlake": 4,  # AVX-512 (+BF16)
    "skylakex": 3,                          # AVX-512
    "haswell": 2, "zen": 2,                 # AVX2 + FMA
    "sandybridge": 1, "bulldozer": 1, "piledriver": 1, "steamroller": 1, "excavator": 1,  # AVX
}
ISA_NAMES = {0: "SSE", 1: "AVX", 2: "AVX2+FMA", 3: "AVX-512", 4: "AVX-512 BF16"}


def isa_level(core):
    """0 (SSE) .. 4 (AVX-512 BF16) for an OpenBLAS core name; None when unknown."""
    return CORE_ISA.get((core or "").lower(), 0 if core else None)


def cpu_isa_level(flags=None):
    """The same scale for this CPU, from /proc/cpuinfo's flags."""
    if flags is None:
        flags = set()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    if "avx512_bf16" in flags and "avx512f" in flags:
        return 4
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return 3
    if {"avx2", "fma"} <= flags:
        return 2
    return 1 if "avx" in flags else 0


def probe(path):
    lib = ctypes.CDLL(path)
    out = {"lib": os.path.realpath(path)}
    try:
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        out["core"] = lib.openblas_get_corename().decode()
        out["config"] = lib.openblas_get_config().decode().strip()
    except AttributeError:
        out.update({"core": None, "error": "not OpenBLAS (no openblas_get_corename)"})
    return out


def mapped(substr):
    with open("/proc/self/maps") as f:
        return sorted({l.split()[-1] for l in f if len(l.split()) >= 6 and substr in os.path.basename(l.split()[-1])})


def torch_blas():
    import torch  # noqa: F401  (Debian's torch calls sgemm_ from libblas.so.3)
    torch.zeros(2, 2) @ torch.zeros(2, 2)
    libs = mapped("openblas")
    if libs:
        return probe(libs[0])
    return {"lib": ",".join(mapped("blas")) or None, "core": None, "error": "torch's BLAS is not OpenBLAS"}


def binary_blas(path):
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    m = re.search(r"libopenblas[^ ]*\s*=>\s*(\S+)", ldd)
    if not m:
        return {"lib": None, "core": None, "error": f"{path} is not linked against OpenBLAS"}
    return probe(m.group(1))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("lib", "torch", "binary"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if sys.argv[1] == "torch":
            out = torch_blas()
        elif sys.argv[1] == "binary":
            out = binary_blas(sys.argv[2])
        else:
            out = probe(sys.argv[2])
    except Exception as e:  # reported, not raised: a missing side is a message in the summary
        out = {"lib": None, "core": None, "error": f"{type(e).__name__}: {e}"}
    out["openblas_coretype_env"] = os.environ.get("OPENBLAS_CORETYPE")
    out["isa_level"] = isa_level(out.get("core"))
    out["cpu_isa_level"] = cpu_isa_level()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
