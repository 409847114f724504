"""How the team's answers name people and machines: the team chooses (``--names``).

- ``hashed`` (the default): a person is a short hash of the address their commits carry
  (as the daemons send it: with ``gitAuthorEmail = "hash"`` already a digest), a machine a
  short hash of its host name. Nobody's name leaves the collector.
- ``names``: people by the name their commits (or their workstation's git configuration)
  give, machines by host name.
- an alias file (``--aliases FILE``, TOML): ``"<short hash>" = "Name"`` lines, for people and
  machines alike; a hash without an alias stays a hash. The short hashes are what the
  dashboard shows in ``hashed`` mode, so a team lead copies them from there.

Aliases apply in either mode, before names.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

__all__ = ["MODES", "AliasFileError", "Naming", "load_aliases", "machine_hash", "short"]

MODES: Final = ("hashed", "names")
Mode = Literal["hashed", "names"]
SHORT: Final = 12  # hex digits shown of a hash: 48 bits, no collision in any team
_MAX_ALIAS: Final = 200


def short(full_hash: str) -> str:
    return full_hash[:SHORT]


def machine_hash(host: str) -> str:
    """A host name as the hashed mode shows it (its case does not matter to DNS)."""
    name = host.strip().lower().encode(errors="surrogatepass")
    return hashlib.blake2b(name, digest_size=12).hexdigest()


class AliasFileError(ValueError):
    pass


def load_aliases(path: Path) -> dict[str, str]:
    """``{short hash: name}`` from a TOML file of ``"hash" = "Name"`` pairs."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise AliasFileError(f"cannot read the alias file {path}: {error}") from None
    aliases = {}
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip() or len(value) > _MAX_ALIAS:
            message = f"the alias of {key!r} in {path} must be a short, non-empty string"
            raise AliasFileError(message)
        aliases[short(key.strip().lower())] = value.strip()
    return aliases


@dataclass(frozen=True, slots=True)
class Naming:
    mode: Mode = "hashed"
    aliases: Mapping[str, str] = field(default_factory=dict)

    def person(self, author: str | None, name: str | None = None) -> str | None:
        """``author`` is the graph's hash of an address; ``name`` what commits call them."""
        if author is None:
            return None
        alias = self.aliases.get(short(author))
        if alias is not None:
            return alias
        return name if self.mode == "names" and name else short(author)

    def machine(self, host: str | None) -> str | None:
        if not host:
            return None
        hashed = short(machine_hash(host))
        alias = self.aliases.get(hashed)
        if alias is not None:
            return alias
        return host if self.mode == "names" else hashed
