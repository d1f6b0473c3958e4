"""A PostgreSQL cluster a test owns (initdb + pg_ctl, on a free port, in a
temporary directory), so it can stop and start a database server without
touching the one other test runs share."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from tests.support.ports import free_port



def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def available() -> bool:
    return _bin_dir() is not None


class OwnCluster:
    """``start()``/``stop()`` the server; ``url(name)`` of a database in it.
    PostgreSQL refuses to run as root: then it runs as the ``postgres`` user."""

    def __init__(self) -> None:
        bindir = _bin_dir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bindir = bindir
        # Directly under the temporary directory: the server's user must reach it.
        self.root = Path(tempfile.mkdtemp(prefix="billeting-pgcluster-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        subprocess.run([*self._as, str(self.bindir / tool), *args], check=True, capture_output=True,
                       timeout=timeout)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off -c max_connections=60"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        """As a crash or an operator would: connections are cut at once."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def create_database(self, name: str) -> str:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # (already stopped)
        shutil.rmtree(self.root, ignore_errors=True)
