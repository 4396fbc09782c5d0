"""Disk faults on one node.

  disk-full     the node's data dir sits on its own small tmpfs (`NodeDisk`); a ballast
                file fills it to the last byte (ENOSPC for every write); heal deletes it
  fsync-eio     the next 1-3 segment fdatasyncs fail with EIO and drop the unsynced data
  write-eio     the next 1-3 segment writes fail with EIO
  torn-write    the next segment write applies a prefix of its bytes, then fails
  slow-disk     every segment write and fdatasync waits 20-300 ms
  power-loss    kill -9 of a node whose unsynced writes are held in memory: what was not
                fdatasynced is gone, as in a power cut
The seam faults (all but disk-full) go through shardlog's storage fault seam: the
`storage_fault = drop-unsynced` injector, armed at run time by a line appended to the
node's control file (src/server/storage_fault_control.rs). A failed write is rolled back and
the node serves on; a failed fdatasync (so, with the injector holding unsynced writes in
memory, a full disk too) takes the log offline and the broker halts, as Kafka's broker with
no log dir left online: heal clears the fault, and the runner restarts a halted node."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

from .base import Nemesis
from .common import Context, pick_node, restart

BALLAST = "chaos-ballast"


class NodeDisk:
    """A node's data dir on its own tmpfs of `size_mb`, and its storage fault control file.
    2 GiB: 512 MiB filled up with a 10-minute run's own data (seed 3, disk: two nodes
    halted on ENOSPC with no ballast, and the cluster lost its quorum to the end)."""

    def __init__(self, data_dir: Path, fault_file: Path, size_mb: int = 2048):
        self.data_dir = Path(data_dir)
        self.fault_file = Path(fault_file)
        self.size_mb = size_mb
        self.mounted = False
        self.generation = 0

    def mount(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.data_dir)],
                       check=True, capture_output=True, text=True, timeout=30)
        self.mounted = True

    def fill(self) -> int:
        """Fills the file system; returns the ballast's bytes."""
        path = self.data_dir / BALLAST
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        written = 0
        try:
            chunk = b"\0" * (1 << 20)
            while True:
                try:
                    written += os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 1:
                        return written
                    chunk = chunk[:len(chunk) // 16 or 1]
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.data_dir / BALLAST).unlink(missing_ok=True)

    def command(self, line: str) -> int:
        """Appends `<generation> <line>` to the control file; returns the generation."""
        self.generation += 1
        with open(self.fault_file, "a") as f:
            f.write(f"{self.generation} {line}\n")
        return self.generation

    def clear(self) -> int:
        """Disarms every fault. The file is rewritten to this one line, so a restarted node
        (which reads it from the start) arms nothing again."""
        self.generation += 1
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(f"{self.generation} clear\n")
        tmp.replace(self.fault_file)
        return self.generation

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.data_dir)], capture_output=True, timeout=30)
            self.mounted = False


class DiskFull(Nemesis):
    name = "disk-full"
    needs = frozenset({"disks"})
    kafka = False  # Kafka takes a full log dir offline and, with one dir, stops

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, "leader") or pick_node(ctx, "any")
        if target is None:
            return None
        n = ctx.disks[target].fill()
        ctx.record("ok", action="disk-full", node=target, ballast_bytes=n)
        return {"node": target}

    def heal(self, ctx: Context, fault: dict) -> None:
        ctx.disks[fault["node"]].free()
        ctx.record("ok", action="disk-freed", node=fault["node"])


SEAM = {
    "fsync-eio": lambda rng: f"sync-eio {rng.randint(1, 3)}",
    "write-eio": lambda rng: f"write-eio {rng.randint(1, 3)}",
    "torn-write": lambda rng: "torn-write 1",
    "slow-disk": lambda rng: f"slow-ms {rng.randint(20, 300)}",
}


class StorageFault(Nemesis):
    needs = frozenset({"storage-faults"})
    kafka = False

    def __init__(self, kind: str):
        if kind not in SEAM:
            raise ValueError(f"storage fault: one of {sorted(SEAM)}")
        self.kind = kind
        self.name = kind

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, "leader") or pick_node(ctx, "any")
        if target is None:
            return None
        line = SEAM[self.kind](ctx.rng)
        gen = ctx.disks[target].command(line)
        ctx.record("ok", action="storage-fault", kind=self.kind, node=target, command=line, generation=gen)
        return {"node": target}

    def heal(self, ctx: Context, fault: dict) -> None:
        ctx.disks[fault["node"]].clear()
        ctx.record("ok", action="storage-fault-cleared", node=fault["node"])


class PowerLoss(Nemesis):
    """kill -9 under the drop-unsynced injector: the node loses what it never synced."""
    name = "power-loss"
    needs = frozenset({"storage-faults"})
    kafka = False

    def inject(self, ctx: Context) -> dict | None:
        target = pick_node(ctx, "any")
        if target is None:
            return None
        ctx.record("ok", action="power-loss", node=target)
        ctx.node(target).kill9()
        return {"node": target}

    def heal(self, ctx: Context, fault: dict) -> None:
        restart(ctx, ctx.node(fault["node"]))
