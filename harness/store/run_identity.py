"""What a run is, as its checkpoint and its phase snapshots record it: the trainer, the seed, and the versions of the
harness and of the packages its first half ran with. A resume compares the manifest with the recorded identity
before the model loads: a manifest edited since (another trainer, another seed) would continue the run as
something it was not, and one whose versions were rewritten would no longer say what produced the first half."""

from __future__ import annotations

from typing import Any


def run_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    config = manifest.get("config") or {}
    return {
        "trainer": config.get("trainer"),
        "seed": config.get("seed"),
        "harness_version": manifest.get("harness_version"),
        "packages": dict(manifest.get("packages") or {}),
    }


def identity_differences(recorded: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """ "FIELD NOW (recorded RECORDED)" for each part of ``recorded`` (a ``run_identity``) that ``manifest`` no
    longer says; a package is named by itself ("torch ...")."""
    now = run_identity(manifest)
    found = [
        f"{key} {now[key]!r} (recorded {recorded[key]!r})"
        for key in ("trainer", "seed", "harness_version")
        if key in recorded and recorded[key] != now[key]
    ]
    was, packages = recorded.get("packages") or {}, now["packages"]
    found += [
        f"{name} {packages.get(name)!r} (recorded {was.get(name)!r})"
        for name in sorted(set(was) | set(packages))
        if was.get(name) != packages.get(name)
    ]
    return found
