"""Where undo's snapshots live for a run, chat or server, and the hook that takes them."""

from __future__ import annotations

from pathlib import Path

from steerable.cli._args import UsageError
from steerable.cli._settings import Settings
from steerable.coding import SnapshotHook, SnapshotLimits, Snapshots
from steerable.storage import default_data_dir

__all__ = ["data_folder", "snapshot_hook", "snapshots_for"]

_MB = 1024 * 1024


def data_folder(settings: Settings) -> Path:
    """steerable's data folder: sessions and snapshots live under it."""
    configured = settings["data_dir"]
    return Path(configured).expanduser() if configured else default_data_dir()


def snapshots_for(settings: Settings, workspace: Path) -> Snapshots:
    try:
        limits = SnapshotLimits(
            max_file_size=int(settings["undo_max_file_mb"] * _MB),
            max_store_size=int(settings["undo_max_store_mb"] * _MB),
            max_age=settings["undo_max_age_days"] * 24 * 3600.0)
    except ValueError as exc:
        raise UsageError(str(exc).replace("SnapshotLimits.", "undo limit ")) from None
    return Snapshots(workspace, data_folder(settings), limits=limits)


def snapshot_hook(settings: Settings, workspace: Path) -> SnapshotHook | None:
    """The hook that snapshots before each call that may change ``workspace``; None when the
    ``undo`` setting is off."""
    if not settings["undo"]:
        return None
    return SnapshotHook(snapshots_for(settings, workspace),
                        restore_on_abort=bool(settings["undo_on_abort"]))
