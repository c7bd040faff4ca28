"""What a kernel run needs from outside: QEMU, a static busybox and Debian's kernel images.

QEMU (``qemu-system-x86``) and busybox (``busybox-static``) are Debian packages, installed with
apt-get when missing. Kernel images are not installed: the newest ``linux-image-…-unsigned``
package of a series is looked up in Debian's package indexes (bookworm, bookworm-security,
bookworm-backports), downloaded, checked against the index's SHA-256 and unpacked with
``dpkg-deb -x`` into the cache::

    $XDG_CACHE_HOME/numasim/kernels/         (default ~/.cache/numasim/kernels/)
        indexes/SUITE.Packages.xz            the package indexes, refreshed after a day
        PACKAGE_VERSION/boot/vmlinuz-RELEASE the kernel
        PACKAGE_VERSION/lib/modules/RELEASE/ its modules
        PACKAGE_VERSION/package.json         package, version, suite, sha256, release

A network failure is one line (exit 2). When the indexes cannot be refreshed but a kernel of
the series is cached, the newest cached one is used and a note says so.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numasim._core import InputError

DEBIAN = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
#: (suite, archive root): where the kernel packages of Debian 12 come from.
SUITES = [
    ("bookworm", DEBIAN),
    ("bookworm-security", SECURITY),
    ("bookworm-backports", DEBIAN),
]
#: ``--kernel`` series → the package names that carry them (the generic amd64 flavour).
SERIES = {
    "6.1": re.compile(r"linux-image-6\.1\.0-\d+-amd64-unsigned"),
    "6.12": re.compile(r"linux-image-6\.12\.\d+\+deb12-amd64-unsigned"),
}
DEFAULT_SERIES = "6.12"
INDEX_MAX_AGE_S = 24 * 3600
NETWORK_TIMEOUT_S = 60
#: Debian packages that give the tools, and the make target that installs them.
TOOL_PACKAGES = {"qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static"}
STATIC_BUSYBOX = Path("/bin/busybox")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/numasim`` (default ``~/.cache/numasim``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "numasim"


# --- Debian versions -------------------------------------------------------------------------


def _order(c: str) -> int:
    """dpkg's weight of one non-digit character: ``~`` first, then the end, letters, others."""
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's comparison of an upstream version or a Debian revision."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = (a[i] > b[j]) - (a[i] < b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as Debian version ``a`` sorts before, with or after ``b`` (as dpkg does)."""

    def split(v: str) -> tuple[int, str, str]:
        epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
        return int(epoch or 0), upstream, revision

    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


# --- package indexes -------------------------------------------------------------------------


@dataclass(frozen=True)
class Package:
    """One kernel package as an index lists it."""

    name: str
    version: str
    filename: str
    sha256: str
    size: int
    suite: str
    archive: str

    @property
    def url(self) -> str:
        return f"{self.archive}/{self.filename}"

    @property
    def key(self) -> str:
        """The cache directory's name: ``PACKAGE_VERSION`` (``~`` kept, ``:`` dropped)."""
        return f"{self.name}_{self.version.replace(':', '%')}"


def parse_index(text: str, suite: str, archive: str, pattern: re.Pattern[str]) -> list[Package]:
    """The packages of a ``Packages`` index whose name matches ``pattern`` in full."""
    out = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        name = fields.get("Package", "")
        if pattern.fullmatch(name) and {"Version", "Filename", "SHA256"} <= fields.keys():
            out.append(
                Package(
                    name,
                    fields["Version"],
                    fields["Filename"],
                    fields["SHA256"],
                    int(fields.get("Size", 0)),
                    suite,
                    archive,
                )
            )
    return out


def newest(packages: list[Package]) -> Package | None:
    """The package of the highest version (the first listed among equals)."""
    best: Package | None = None
    for p in packages:
        if best is None or compare_versions(p.version, best.version) > 0:
            best = p
    return best


def _fetch(url: str, dest: Path, progress: Callable[[str], None] | None = None) -> str:
    """Download ``url`` to ``dest`` (through a temporary file); returns its SHA-256."""
    digest = hashlib.sha256()
    tmp = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=NETWORK_TIMEOUT_S) as r, tmp.open("wb") as f:
            total = int(r.headers.get("Content-Length") or 0)
            done, shown = 0, 0.0
            while chunk := r.read(1 << 20):
                f.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress and total and time.monotonic() - shown > 5:
                    shown = time.monotonic()
                    progress(f"{done / 2**20:.0f} of {total / 2**20:.0f} MB")
        tmp.replace(dest)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise NetworkError(f"{url}: cannot download: {reason}") from None
    finally:
        tmp.unlink(missing_ok=True)  # a failed or interrupted download leaves nothing
    return digest.hexdigest()


class NetworkError(InputError):
    """A download failed (one line naming the address)."""


def _index(suite: str, archive: str, cache: Path, refresh: bool) -> str:
    path = cache / "indexes" / f"{suite}.Packages.xz"
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.is_file() and time.time() - path.stat().st_mtime < INDEX_MAX_AGE_S
    if refresh or not fresh:
        _fetch(f"{archive}/dists/{suite}/main/binary-amd64/Packages.xz", path)
    return lzma.decompress(path.read_bytes()).decode("utf-8", errors="replace")


# --- kernels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """A kernel image ready to boot."""

    vmlinuz: Path
    #: ``PACKAGE_VERSION`` of the Debian package, or None for a file given by path.
    package: str | None
    #: The release (``uname -r``) the package's file names say; None for a file by path.
    release: str | None
    modules: Path | None
    notes: tuple[str, ...] = ()


def _cached(cache: Path, series: str) -> list[tuple[dict, Path]]:
    """Every complete cached kernel of ``series``: (its package.json, its directory)."""
    out = []
    for meta in sorted((cache / "kernels").glob("*/package.json")):
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if SERIES[series].fullmatch(info.get("package", "")):
            out.append((info, meta.parent))
    return out


def _kernel_from_dir(info: dict, d: Path, notes: tuple[str, ...] = ()) -> Kernel:
    release = info["release"]
    modules = d / "lib" / "modules" / release
    return Kernel(
        d / "boot" / f"vmlinuz-{release}",
        f"{info['package']}_{info['version']}",
        release,
        modules if modules.is_dir() else None,
        notes,
    )


def resolve_kernel(
    spec: str, progress: Callable[[str], None] | None = None, cache: Path | None = None
) -> Kernel:
    """``--kernel``: a series (``6.1``, ``6.12``: the newest Debian package, downloaded once)
    or the path of a vmlinuz file."""
    if spec not in SERIES:
        path = Path(spec)
        if not path.is_file():
            raise InputError(
                f"--kernel: '{spec}' is neither a kernel series ({', '.join(SERIES)}) "
                "nor a kernel image file"
            )
        return Kernel(path.resolve(), None, None, None)
    cache = cache or cache_root()
    root = cache / "kernels"
    candidates: list[Package] = []
    try:
        for suite, archive in SUITES:
            text = _index(suite, archive, root, refresh=False)
            candidates += parse_index(text, suite, archive, SERIES[spec])
    except NetworkError as e:
        have = _cached(cache, spec)
        if not have:
            raise
        info, d = max(have, key=_version_key)
        note = f"package indexes unreachable ({e}); used the newest cached {info['package']}"
        return _kernel_from_dir(info, d, (note,))
    best = newest(candidates)
    if best is None:
        raise InputError(
            f"--kernel {spec}: no package matching {SERIES[spec].pattern} in "
            f"{', '.join(s for s, _ in SUITES)}"
        )
    d = root / best.key
    meta = d / "package.json"
    if meta.is_file():
        return _kernel_from_dir(json.loads(meta.read_text()), d)
    return _kernel_from_dir(_install(best, d, progress), d)


def _version_key(item: tuple[dict, Path]):
    from functools import cmp_to_key

    return cmp_to_key(compare_versions)(item[0]["version"])


def _install(pkg: Package, d: Path, progress: Callable[[str], None] | None) -> dict:
    """Download, check and unpack ``pkg`` into ``d`` (via a temporary directory beside it)."""
    d.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=d.parent, prefix=".unpack-") as tmp:
        deb = Path(tmp) / "package.deb"
        if progress:
            progress(f"downloading {pkg.name} {pkg.version} ({pkg.size / 2**20:.0f} MB, {pkg.url})")
        digest = _fetch(pkg.url, deb, progress)
        if digest != pkg.sha256:
            raise InputError(
                f"{pkg.url}: SHA-256 {digest} differs from the index's {pkg.sha256}; not used"
            )
        root = Path(tmp) / "root"
        done = subprocess.run(
            ["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True
        )
        if done.returncode:
            raise InputError(f"{deb.name}: dpkg-deb cannot unpack it: {done.stderr.strip()}")
        images = sorted((root / "boot").glob("vmlinuz-*"))
        if not images:
            raise InputError(f"{pkg.url}: the package holds no boot/vmlinuz-*")
        release = images[0].name.removeprefix("vmlinuz-")
        keep = Path(tmp) / "keep"
        (keep / "boot").mkdir(parents=True)
        images[0].replace(keep / "boot" / images[0].name)
        config = root / "boot" / f"config-{release}"
        if config.is_file():
            config.replace(keep / "boot" / config.name)
        modules = root / "lib" / "modules" / release
        if modules.is_dir():
            (keep / "lib" / "modules").mkdir(parents=True)
            modules.replace(keep / "lib" / "modules" / release)
        info = {
            "package": pkg.name,
            "version": pkg.version,
            "suite": pkg.suite,
            "url": pkg.url,
            "sha256": pkg.sha256,
            "release": release,
        }
        (keep / "package.json").write_text(json.dumps(info, indent=1) + "\n")
        if d.exists():  # another numasim unpacked it meanwhile
            return json.loads((d / "package.json").read_text())
        keep.replace(d)
    return info


# --- tools -----------------------------------------------------------------------------------


def _is_static(path: Path) -> bool:
    """An ELF file without a program interpreter (PT_INTERP): statically linked."""
    import struct

    try:
        with path.open("rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
                return False
            (phoff,) = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def busybox_path() -> Path | None:
    """A statically linked busybox (Debian's busybox-static puts it at /bin/busybox)."""
    for p in (STATIC_BUSYBOX, Path(shutil.which("busybox") or "/nonexistent")):
        if p.is_file() and _is_static(p):
            return p
    return None


def missing_tools() -> list[str]:
    """The Debian packages of the tools that are not there."""
    missing = []
    if not shutil.which("qemu-system-x86_64"):
        missing.append(TOOL_PACKAGES["qemu-system-x86_64"])
    if busybox_path() is None:
        missing.append(TOOL_PACKAGES["busybox"])
    if not shutil.which("dpkg-deb"):
        missing.append("dpkg")
    return missing


def ensure_tools(progress: Callable[[str], None] | None = None) -> None:
    """Install QEMU and busybox-static with apt-get when they are missing (as root, or with
    sudo); one line saying what to install otherwise."""
    missing = missing_tools()
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    hint = f"install {' '.join(missing)} (make kernel-tools)"
    if sudo is None or not shutil.which("apt-get"):
        raise InputError(f"kernel-run needs QEMU and a static busybox: {hint}")
    if progress:
        progress(f"installing {' '.join(missing)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = [*sudo, "apt-get", "install", "-y", "-q", *missing]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        subprocess.run([*sudo, "apt-get", "update", "-q"], capture_output=True, env=env)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode or missing_tools():
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"kernel-run: apt-get could not {hint}: {last}")


def qemu_version() -> str:
    """``qemu-system-x86_64 --version``'s version number."""
    out = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True)
    m = re.search(r"version (\S+)", out.stdout)
    return m[1] if m else "unknown"


def main(argv: list[str] | None = None) -> int:
    """``python -m numasim.kernel.images [SERIES ...]``: make sure QEMU, a static busybox and
    the newest kernel of each series (default 6.12) are here; print each kernel's path."""
    import sys

    def say(message: str) -> None:
        print(f"numasim: {message}", file=sys.stderr)

    try:
        ensure_tools(say)
        for series in (argv if argv is not None else sys.argv[1:]) or ["6.12"]:
            print(resolve_kernel(series, say).vmlinuz)
    except InputError as e:
        print(f"numasim: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
