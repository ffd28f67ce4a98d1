"""What a release is made of, by name: the data's fingerprint, the public box, the mechanism and
its settings, ε and the randomness.

Its `text` (a JSON list) names the release everywhere it is kept: the store's entry, the charge
in the budget account (`ref`), the workspace's record and the page. The text is the one earlier
versions wrote, so the charges already made still name their releases; code reads the fields by
name (`ReleaseKey.parse`), never by position.
"""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

import dp


@dataclass(frozen=True)
class ReleaseKey:
    fingerprint: str            # the dataset's (`PointData.fingerprint`)
    domain: dict                # the public box, `dp.Domain.to_dict()`
    mechanism: str
    params: dict
    split: list
    epsilon: float
    tag: int | str              # a fixed seed (a labelled demo), or "fresh:<token>": fresh randomness
    points_per_user: int | None  # k of a user-level release (None: the default, or event level)

    @classmethod
    def make(cls, fingerprint: str, domain: dp.Domain, mechanism: str, params: dict, split,
             epsilon: float, seed: int | None, points_per_user: int | None = None) -> ReleaseKey:
        """The key of a new release; seed None means fresh OS entropy: the key then carries a
        random token instead (never shown), so each fresh release is a new draw that cannot be
        rebuilt."""
        tag = seed if seed is not None else "fresh:" + secrets.token_hex(16)
        return cls(fingerprint, domain.to_dict(), mechanism, params, list(split), epsilon, tag,
                   points_per_user)

    @classmethod
    def parse(cls, text: str) -> ReleaseKey:
        """The key a text names (ValueError or TypeError when it names none)."""
        fields = json.loads(text)
        if not isinstance(fields, list):
            raise ValueError("a release key is a JSON list")
        return cls(*fields)

    @property
    def text(self) -> str:
        return json.dumps([self.fingerprint, self.domain, self.mechanism, self.params, list(self.split),
                           self.epsilon, self.tag, self.points_per_user], sort_keys=True, default=str)

    @property
    def seed(self) -> int | None:
        """The fixed seed of a demo, or None for fresh randomness."""
        return None if isinstance(self.tag, str) else self.tag

    @property
    def box(self) -> dp.Domain:
        return dp.Domain.from_dict(self.domain)
