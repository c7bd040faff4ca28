#!/usr/bin/env python3
"""Capture the scheduling domains a real Linux kernel builds for a given SLIT.

Boots a kernel under QEMU (TCG, no KVM needed) with `-numa dist` set to the table and a busybox
initramfs that prints debugfs's per-domain parameters and the `sched_verbose` boot log (spans,
groups, balance masks), then writes the JSON format of crates/numasim-core/tests/data/*.json.

    make kernel-tools        # qemu-system-x86, busybox-static
    apt-get download linux-image-6.1.0-56-amd64 && dpkg -x linux-image-*.deb kroot
    .venv/bin/python tools/capture_kernel_domains.py --kernel kroot/boot/vmlinuz-6.1.0-56-amd64 \
        --slit table.slit --cpus 2,2,0,2 --out capture.json

(`numasim kernel-run` keeps Debian's kernels in ~/.cache/numasim/kernels/, usable here too.)

Not run by the tests (it needs QEMU and a kernel image); the captures it makes are.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs none /sys/kernel/debug
echo "=== BEGIN DEBUGFS"
for c in /sys/kernel/debug/sched/domains/cpu*; do
  for d in $c/domain*; do
    echo "$(basename $c) $(basename $d) name=$(cat $d/name) flags=$(cat $d/flags | tr ' ' ',')" \
         "imb=$(cat $d/imbalance_pct) min=$(cat $d/min_interval) max=$(cat $d/max_interval)" \
         "busy=$(cat $d/busy_factor)"
  done
done
echo "=== END DEBUGFS"
echo "=== BEGIN DMESG"
dmesg | grep -E "attaching sched-domain|domain-[0-9]+:|groups:"
echo "=== END DMESG"
poweroff -f
"""


def cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def make_initrd(work: Path) -> Path:
    """A newc initramfs of a static busybox and INIT (numasim.kernel.guest writes the archive)."""
    from numasim.kernel.guest import S_IFCHR, S_IFDIR, S_IFREG, cpio_newc
    from numasim.kernel.images import busybox_path

    busybox = busybox_path()
    if busybox is None:
        raise SystemExit("needs a static busybox: apt-get install busybox-static")
    entries = [(d, S_IFDIR | 0o755, b"", (0, 0)) for d in ("bin", "dev", "proc", "sys")]
    entries += [
        ("dev/console", S_IFCHR | 0o600, b"", (5, 1)),
        ("bin/busybox", S_IFREG | 0o755, busybox.read_bytes(), (0, 0)),
        ("init", S_IFREG | 0o755, INIT.encode(), (0, 0)),
    ]
    out = work / "initrd.cpio"
    out.write_bytes(cpio_newc(entries))
    return out


def boot(kernel: Path, slit: list[list[int]], counts: list[int], work: Path) -> str:
    initrd = make_initrd(work)
    total = sum(counts)
    args = [
        "qemu-system-x86_64", "-machine", "q35", "-m", f"{128 * len(counts)}M",
        "-smp", str(total), "-kernel", str(kernel), "-initrd", str(initrd),
        "-append", "console=ttyS0 sched_verbose log_buf_len=16M loglevel=4 panic=-1",
        "-display", "none", "-serial", f"file:{work / 'serial.txt'}", "-no-reboot",
    ]  # fmt: skip
    cpu = 0
    for node, count in enumerate(counts):
        args += ["-object", f"memory-backend-ram,id=m{node},size=128M"]
        spec = f"node,nodeid={node},memdev=m{node}"
        if count:
            spec += f",cpus={cpu}-{cpu + count - 1}"
        args += ["-numa", spec]
        cpu += count
    for i, row in enumerate(slit):
        for j, v in enumerate(row):
            if i != j:
                args += ["-numa", f"dist,src={i},dst={j},val={v}"]
    subprocess.run(args, check=True, timeout=1800)
    return (work / "serial.txt").read_text(errors="replace")


def parse(serial: str) -> dict[str, list[dict]]:
    debugfs = serial.split("=== BEGIN DEBUGFS")[1].split("=== END DEBUGFS")[0]
    dmesg = serial.split("=== BEGIN DMESG")[1].split("=== END DMESG")[0]
    params: dict[int, dict[int, dict]] = {}
    for line in debugfs.splitlines():
        m = re.match(r"cpu(\d+) domain(\d+) name=(\S+) flags=(\S*) imb=(\d+) min=(\d+) max=(\d+)"
                     r" busy=(\d+)", line.strip())  # fmt: skip
        if not m:
            continue
        cpu, dom = int(m[1]), int(m[2])
        params.setdefault(cpu, {})[dom] = {
            "name": m[3],
            "flags": [f for f in m[4].split(",") if f],
            "imbalance_pct": int(m[5]),
            "min_interval_ms": int(m[6]),
            "max_interval_ms": int(m[7]),
            "busy_factor": int(m[8]),
        }
    cpus: dict[str, list[dict]] = {}
    current = None
    levels: list[dict] = []
    for line in dmesg.splitlines():
        if m := re.search(r"CPU(\d+) attaching sched-domain", line):
            current = int(m[1])
            levels = cpus.setdefault(str(current), [])
        elif m := re.search(r"domain-(\d+): span=(\S+) level=(\S+)", line):
            levels.append({"level": int(m[1]), "span": cpulist(m[2])})
        elif "groups:" in line:
            groups = []
            for g in re.finditer(r"(\d+):\{ span=(\S+)(?: mask=(\S+))?", line):
                group = {"first": int(g[1]), "span": cpulist(g[2])}
                if g[3]:
                    group["balance_mask"] = cpulist(g[3])
                groups.append(group)
            levels[-1]["groups"] = groups
    for cpu, lv in cpus.items():
        for level in lv:
            p = params[int(cpu)][level["level"]]
            level.update({"name": p["name"], **{k: v for k, v in p.items() if k != "name"}})
            order = ["level", "name", "span", "groups", "flags", "imbalance_pct",
                     "min_interval_ms", "max_interval_ms", "busy_factor"]  # fmt: skip
            level_sorted = {k: level[k] for k in order}
            level.clear()
            level.update(level_sorted)
    return dict(sorted(cpus.items(), key=lambda kv: int(kv[0])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", type=Path, required=True)
    ap.add_argument("--slit", type=Path, required=True, help="sysfs-style distance rows")
    ap.add_argument("--cpus", required=True, help="CPUs per node: one number, or a list a,b,c")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    slit = [[int(v) for v in line.split()] for line in a.slit.read_text().splitlines() if line]
    counts = [int(c) for c in a.cpus.split(",")]
    if len(counts) == 1:
        counts *= len(slit)
    with tempfile.TemporaryDirectory() as tmp:
        serial = boot(a.kernel, slit, counts, Path(tmp))
    version = re.search(r"Linux version (\S+)", serial)
    capture = {
        "kernel": f"Linux {version[1] if version else '?'} under QEMU, q35, -numa dist "
        "(tools/capture_kernel_domains.py)",
        "cpus_per_node": counts[0] if len(set(counts)) == 1 else counts,
        "slit": slit,
        "cpus": parse(serial),
    }
    a.out.write_text(json.dumps(capture, indent=1) + "\n")


if __name__ == "__main__":
    main()
