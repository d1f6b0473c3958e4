"""The identity files of one all-in-one run, and what goes in them.

Everything lives in ``<state dir>/identity/`` (emptied with the state
directory at each start): Keystone's configuration, SQLite database and
key repositories, the keystonemiddleware section the services read, and
the ``clouds.yaml`` handed to clients. The admin password is new at each
start and only written to files readable by their owner.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

DIRECTORY = "identity"
CLOUD_NAME = "billeting"
REGION = "RegionOne"
ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"


@dataclass(frozen=True)
class Endpoints:
    """Public URLs put in Keystone's service catalog."""

    compute: str     # ends in /v2.1
    placement: str
    image: str


@dataclass(frozen=True)
class IdentityLayout:
    root: Path              # <state dir>/identity
    host: str               # where Keystone listens
    port: int
    admin_password: str

    @classmethod
    def new(cls, state: Path, host: str, port: int, admin_password: str | None = None) -> IdentityLayout:
        return cls(root=state / DIRECTORY, host=host, port=port,
                   admin_password=admin_password or secrets.token_urlsafe(18))

    @property
    def public_host(self) -> str:
        """The address clients are given: a wildcard listen address is not one they can reach."""
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"[{host}]" if ":" in host else host

    @property
    def auth_url(self) -> str:
        return f"http://{self.public_host}:{self.port}/v3"

    @property
    def keystone_conf(self) -> Path:
        return self.root / "keystone.conf"

    @property
    def authtoken_conf(self) -> Path:
        return self.root / "authtoken.conf"

    @property
    def clouds_yaml(self) -> Path:
        return self.root / "clouds.yaml"

    def write(self) -> None:
        """Write Keystone's configuration, the services' keystonemiddleware
        section and clouds.yaml (before Keystone starts: the child reads the first)."""
        self.root.mkdir(mode=0o700, exist_ok=True)
        _private(self.keystone_conf, self.keystone_conf_text())
        _private(self.authtoken_conf, self.authtoken_conf_text())
        _private(self.clouds_yaml, self.clouds_yaml_text())

    def keystone_conf_text(self) -> str:
        r = self.root
        return f"""[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///{r / 'keystone.sqlite'}
[token]
provider = fernet
[fernet_tokens]
key_repository = {r / 'fernet-keys'}
[fernet_receipts]
key_repository = {r / 'fernet-receipts'}
[credential]
key_repository = {r / 'credential-keys'}
[identity]
# A development cloud: cheap hashes keep the first start and each token issue fast.
password_hash_rounds = 4
[oslo_policy]
enforce_new_defaults = true
enforce_scope = false
"""

    def authtoken_conf_text(self) -> str:
        """The services validate tokens as the admin user (a separate service
        user is what production has; here there is one operator)."""
        return f"""[keystone_authtoken]
www_authenticate_uri = {self.auth_url}
auth_url = {self.auth_url}
auth_type = password
username = {ADMIN_USER}
password = {self.admin_password}
project_name = {ADMIN_PROJECT}
user_domain_id = default
project_domain_id = default
region_name = {REGION}
interface = public
service_token_roles_required = true
"""

    def clouds_yaml_text(self) -> str:
        return f"""clouds:
  {CLOUD_NAME}:
    auth:
      auth_url: {self.auth_url}
      username: {ADMIN_USER}
      password: {self.admin_password}
      project_name: {ADMIN_PROJECT}
      user_domain_name: Default
      project_domain_name: Default
    region_name: {REGION}
    identity_api_version: 3
    interface: public
"""


def _private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (it holds the admin password)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
