"""Files that survive a crash whole: an atomic replace (tmp, fsync, rename, fsync of the directory) and the
fsyncs of a file or a directory. Used by the log's checkpoints and by every store a broker keeps on disk
(credentials, ACLs, quotas, producer ids, cluster state).
"""

from __future__ import annotations

import os
from pathlib import Path

_fdatasync = getattr(os, "fdatasync", os.fsync)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path, *, data_only: bool = False) -> None:
    """fsync (or fdatasync) the file at ``path``; a file deleted meanwhile has nothing left to sync."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    try:
        if data_only:
            _fdatasync(fd)
        else:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` so that after a crash it holds either the old or the new content: tmp, fsync, rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), mode)
    os.fchmod(fd, mode)  # a tmp file left by a crash keeps its old mode otherwise
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
