"""Session stores that live on disk (the default is one JSON-lines file per session), and the
checkpoint protocol and record schema every store that keeps durable turns shares.

A backend that keeps checkpoints implements ``CheckpointStore`` (``save_checkpoint``,
``load_checkpoint``, ``delete_checkpoint``) next to ``SessionStore``, and stores each
``Checkpoint`` as the JSON object ``checkpoint_to_record`` gives (``checkpoint_from_record``
reads it back, checking the schema version). ``tests/storage/checkpoint_contract.py`` is the
behaviour every backend must pass.
"""

from steerable._core._checkpoint import Checkpoint, CheckpointStore
from steerable.errors import CheckpointError
from steerable.storage._checkpoint_records import (
    CHECKPOINT_VERSION,
    checkpoint_from_record,
    checkpoint_to_record,
)
from steerable.storage.jsonl import JSONLSessionStore, SessionFileError, default_data_dir

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "JSONLSessionStore",
    "SessionFileError",
    "checkpoint_from_record",
    "checkpoint_to_record",
    "default_data_dir",
]
