"""A PostgreSQL cluster of the test's own (initdb + pg_ctl in a temporary
directory, on a free port), so a test can stop and start the database under a
running server without touching the shared one."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tests.support.ports import free_port



def postgres_bindir() -> str | None:
    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return os.path.dirname(initdb)
    found = shutil.which("initdb")
    return os.path.dirname(found) if found else None


@dataclass(slots=True)
class PrivateCluster:
    bindir: str
    directory: Path
    port: int
    as_user: list[str]  # the command prefix that runs as the cluster's owner (PostgreSQL refuses root)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run([*self.as_user, f"{self.bindir}/pg_ctl", "-D", str(self.directory / "data"),
                        "-l", str(self.directory / "server.log"), "-w", "-t", "60", *args],
                       check=True, capture_output=True, timeout=90)

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=50")
        self._ctl("-o", options, "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")  # ends every session, as a restart or crash would

    def log(self) -> str:
        try:
            return (self.directory / "server.log").read_text(errors="replace")
        except OSError:
            return ""


@contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    bindir = postgres_bindir()
    assert bindir, "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    directory = Path(tempfile.mkdtemp(prefix="billeting-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    cluster = PrivateCluster(bindir, directory, free_port(), as_user)
    try:
        subprocess.run([*as_user, f"{bindir}/initdb", "-D", str(directory / "data"), "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, timeout=120)
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass  # already stopped, or never started
        shutil.rmtree(directory, ignore_errors=True)
