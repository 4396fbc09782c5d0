#!/usr/bin/env python3
"""Buffered sequential writes with and without page-cache recycling (storage/page_cache.rs).

Writes TOTAL_MIB of 64 KiB writes to PATH and prints MB/s per GiB, in one of three ways:
  plain       write only (the kernel decides; Apache Kafka's way)
  writeback   sync_file_range(WRITE) every 8 MiB, nothing dropped
  recycle     that, plus posix_fadvise(DONTNEED) of ranges older than RETAIN_MIB
Usage: page_cache_recycling.py plain|writeback|recycle TOTAL_MIB PATH [RETAIN_MIB]
Alternate the modes (A B A B) and compare medians: the disk's speed varies run to run.
"""
import ctypes
import os
import sys
import time

SYNC_FILE_RANGE_WRITE = 2
WINDOW = 8 << 20


def main():
    mode, total, path = sys.argv[1], int(sys.argv[2]) << 20, sys.argv[3]
    retain = (int(sys.argv[4]) if len(sys.argv) > 4 else 1024) << 20
    libc = ctypes.CDLL(None, use_errno=True)
    chunk = b"x" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.time()
    pos = dropped = 0
    marks = []
    while pos < total:
        os.write(fd, chunk)
        pos += len(chunk)
        if mode != "plain" and pos % WINDOW == 0:
            libc.sync_file_range(fd, ctypes.c_int64(pos - WINDOW), ctypes.c_int64(WINDOW), SYNC_FILE_RANGE_WRITE)
            upto = pos - retain - WINDOW
            if mode == "recycle" and upto > dropped:
                os.posix_fadvise(fd, dropped, upto - dropped, os.POSIX_FADV_DONTNEED)
                dropped = upto
        if pos % (1 << 30) == 0:
            marks.append(time.time())
    t1 = time.time()
    os.fdatasync(fd)
    t2 = time.time()
    os.close(fd)
    os.unlink(path)
    per_gib = [f"{(1 << 30) / (b - a) / 1e6:.0f}" for a, b in zip([t0] + marks, marks)]
    print(f"{mode}: {total / (t1 - t0) / 1e6:.0f} MB/s written, {total / (t2 - t0) / 1e6:.0f} MB/s with the final "
          f"fdatasync; per GiB: {' '.join(per_gib)}")


if __name__ == "__main__":
    main()
