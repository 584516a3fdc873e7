"""CUDA-only libraries, known from data and from the installed distribution.

``cuda_libraries.json`` (beside this file; made from a census, see
benchmarks/cuda_library_census.py) maps an import name to its kind: ``blocks`` (CUDA kernels
with no CPU or PyTorch path), ``replacement`` (a PyTorch equivalent exists), ``triton``, or
``fallback`` (has a CPU path: never reported). Where the package is installed, its distribution
is looked at too, without importing it: shared objects that link ``libcudart``/``libcuda``/NCCL,
Triton kernels among its Python files, CUDA packages among its requirements. That evidence is
named in the finding, and it is what decides for a third-party import the data does not know.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import struct
import sys
from pathlib import Path

DATA = Path(__file__).with_name("cuda_libraries.json")
CUDA_LINKS = (b"libcudart.so", b"libcuda.so", b"libnccl.so", b"libcublas.so", b"libcudnn.so")
CUDA_REQUIREMENT = re.compile(r"^(?:nvidia-[a-z-]+-cu\d+|nvidia-cuda-[a-z-]+|cuda-python|cupy-cuda|triton\b|"
                              r"flash[-_]attn|bitsandbytes)", re.IGNORECASE)
MAX_FILES = 200  # Python files read for Triton kernels, per distribution


@dataclasses.dataclass(frozen=True)
class Library:
    name: str  # the import name, dotted for a subpackage (numba.cuda)
    kind: str  # blocks | replacement | triton | fallback
    advice: str
    census: str


@functools.cache
def known() -> dict[str, Library]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return {entry["import"]: Library(entry["import"], entry["kind"], entry["advice"], entry["census"])
            for entry in data["libraries"]}


@functools.cache
def known_tops() -> frozenset[str]:
    return frozenset(name.split(".")[0] for name in known())


def library_for(module: str) -> Library | None:
    """The entry for ``module`` or its longest known parent package (``numba.cuda.jit`` ->
    ``numba.cuda``, ``numba.njit`` -> ``numba``)."""
    if module.partition(".")[0] not in known_tops():  # most names: one set lookup
        return None
    table = known()
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


# -- evidence from an installed distribution ---------------------------------------------------
def distribution_evidence(info: str) -> list[str]:
    """What the distribution whose ``*.dist-info`` folder is ``info`` installed that ties it to
    CUDA, at most one line per kind of evidence. Reads its RECORD and METADATA as text
    (importlib.metadata's file objects cost more than the check)."""
    site = os.path.dirname(info)
    try:
        with open(os.path.join(info, "RECORD"), encoding="utf-8", errors="replace") as handle:
            files = [line.split(",")[0] for line in handle if line.strip()]
    except OSError:
        files = []
    found: list[str] = []
    for name in files:
        if name.endswith((".so", ".pyd")) or ".so." in name:
            linked = _links_cuda(Path(site, name))
            if linked:
                found.append(f"{os.path.basename(name)} links {linked}")
                break
    read = 0
    for name in files:  # Triton kernels live in files named for them (ops/triton/..., *_kernel.py)
        if name.endswith(".py") and read < MAX_FILES and ("triton" in name or "kernel" in name):
            read += 1
            try:
                text = Path(site, name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "@triton.jit" in text or "@triton.autotune" in text:
                found.append(f"Triton kernels in {name}")
                break
    requirements = []
    try:
        with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the headers end at the first blank line
                if line.startswith("Requires-Dist:"):
                    requirement = line[len("Requires-Dist:"):].strip()
                    if CUDA_REQUIREMENT.match(requirement) and "extra ==" not in requirement:
                        requirements.append(requirement.split(";")[0].strip())
    except OSError:
        pass
    if requirements:
        found.append("requires " + ", ".join(requirements[:3]))
    return found


def _links_cuda(path: Path) -> str | None:
    """The first CUDA library among the shared object's DT_NEEDED entries."""
    try:
        needed = elf_needed(path)
    except (OSError, ValueError, struct.error):
        return None
    for name in needed:
        for library in CUDA_LINKS:
            if name.startswith(library.decode()):
                return name
    return None


def elf_needed(path: Path) -> list[str]:
    """The libraries a 64-bit little-endian ELF shared object links (its DT_NEEDED entries),
    read from its section headers: a few kilobytes, whatever the file's size."""
    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return []
        shoff, = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind != 6 or not entsize:  # SHT_DYNAMIC
                continue
            f.seek(offset)
            dynamic = f.read(size)
            strings_at = sections[link][4]  # .dynstr holds every symbol name too: read only the names needed
            out = []
            for i in range(0, len(dynamic) - 15, entsize):
                tag, value = struct.unpack_from("<qQ", dynamic, i)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    f.seek(strings_at + value)
                    out.append(f.read(128).split(b"\0", 1)[0].decode(errors="replace"))
            return out
    return []


@functools.lru_cache(maxsize=512)
def installed_evidence(top: str) -> tuple[str, ...] | None:
    """Evidence of the installed third-party package ``top`` (a top-level import name); None
    when it is not installed outside the standard library (a local module, or absent)."""
    if top in sys.stdlib_module_names or top.startswith("_"):
        return None
    import importlib.util

    try:
        spec = importlib.util.find_spec(top)  # finds, never imports, a top-level package
    except Exception:  # noqa: BLE001 - a broken finder on sys.path: no evidence, never a failed scan
        return None
    origin = (spec.origin or "") if spec else ""
    locations = list(spec.submodule_search_locations or ()) if spec else []
    where = origin or (locations[0] if locations else "")
    if not where or not any(part in where for part in ("site-packages", "dist-packages")):
        return None
    folder = os.path.dirname(origin if origin and not locations else where.rstrip(os.sep))
    if origin and locations:  # a package: origin is its __init__.py
        folder = os.path.dirname(os.path.dirname(origin))
    info = _dist_info_of(folder, top)
    return _evidence_of(info) if info else ()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_of(folder: str, top: str) -> str | None:
    """The ``*.dist-info`` folder in ``folder`` that installed the top-level package ``top``:
    the one named after it, else the one whose top_level.txt or RECORD lists it."""
    try:
        infos = sorted(n for n in os.listdir(folder) if n.endswith(".dist-info"))
    except OSError:
        return None
    for info in infos:
        if _normal(info.split("-")[0]) == _normal(top):
            return os.path.join(folder, info)
    for listing in ("top_level.txt", "RECORD"):  # the short listings of every folder first
        for info in infos:
            try:
                with open(os.path.join(folder, info, listing), encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            if re.search(rf"^{re.escape(top)}(?:/|\.py|$)", text, re.MULTILINE):
                return os.path.join(folder, info)
    return None


@functools.lru_cache(maxsize=256)
def _evidence_of(info: str) -> tuple[str, ...]:
    return tuple(distribution_evidence(info))


def environment_identity() -> str:
    """The installed distributions (names of the ``*.dist-info`` folders on ``sys.path``): a
    scan result that used their evidence is valid only for the same set."""
    names: list[str] = []
    for entry in sys.path:
        try:
            names += [n for n in os.listdir(entry or ".") if n.endswith(".dist-info")]
        except OSError:
            continue
    return ";".join(sorted(names))
