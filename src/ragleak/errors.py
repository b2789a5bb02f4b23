"""User-facing errors.

Every failure a user can cause (bad input, a missing package, a dead endpoint) is raised as a
``RagleakError`` subclass whose message says what went wrong and what to do. The CLI prints
the message on one line and exits with status 2; library callers can catch the class.
"""

from __future__ import annotations


class RagleakError(Exception):
    """Base class for errors that are the user's to fix; the CLI exits 2 on them."""


class ConfigError(RagleakError):
    """A configuration file or value is invalid."""


class ModelNotInstalledError(RagleakError):
    """A model's registry package is missing, or its weights fail verification."""


class EmbedderNotInstalledError(RagleakError):
    """The embedding model's registry package is missing."""


class CorpusError(RagleakError):
    """A corpus is empty, malformed, or cannot be decoded."""


class IndexStoreError(RagleakError):
    """An index directory is missing, incomplete or corrupt."""


class EndpointError(RagleakError):
    """An HTTP target could not be reached or answered with something unusable."""


class TargetError(RagleakError):
    """A user-supplied target (callable) failed or returned an unusable value."""


class CacheCorruptError(RagleakError):
    """A generation cache file cannot be read (truncated, overwritten, or of an unknown schema)."""


class RunLockedError(RagleakError):
    """Another process holds the run directory's lock."""
