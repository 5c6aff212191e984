"""Session stores that live on disk; the default is one JSON-lines file per session."""

from steerable.storage.jsonl import JSONLSessionStore, SessionFileError, default_data_dir

__all__ = ["JSONLSessionStore", "SessionFileError", "default_data_dir"]
