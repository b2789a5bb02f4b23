"""Loading a packaged ONNX encoder and its tokenizer the same way for every model that uses one
(the embedder, the NLI stage): CPU only, a fixed thread count, onnxruntime's own logging quiet."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path


def onnx_session(model_path: Path, n_threads: int):
    """An onnxruntime CPU session using ``n_threads`` intra-op threads and one inter-op thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = n_threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])


def load_tokenizer(path: Path, max_tokens: int, pad_to: int | None = None):
    """A ``tokenizers`` tokenizer truncating at ``max_tokens`` and padding each batch to its
    longest row, or to ``pad_to`` tokens for a graph with a fixed input length."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_tokens)
    if pad_to is None:
        tokenizer.enable_padding()
    else:
        tokenizer.enable_padding(length=pad_to, pad_id=0, pad_token="[PAD]")
    return tokenizer


class PackagedOnnxModel(ABC):
    """Base of a packaged ONNX encoder. The constructor stores settings only; ``prepare`` checks
    and loads the files ``model_files`` names (once, on first use), and ``_lock`` serialises runs
    of the one session."""

    max_tokens: int
    pad_to_max_tokens: bool = False  # a graph with a fixed input length

    def __init__(self, n_threads: int = 1, batch_size: int = 32) -> None:
        self.n_threads = n_threads
        self.batch_size = batch_size
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    @abstractmethod
    def model_files(self) -> tuple[Path, Path]:
        """The SHA-256-checked ONNX graph and tokenizer.json of the installed package."""

    def prepare(self) -> None:
        if self._session is not None:
            return
        onnx_path, tokenizer_path = self.model_files()
        self._tokenizer = load_tokenizer(tokenizer_path, self.max_tokens,
                                         pad_to=self.max_tokens if self.pad_to_max_tokens else None)
        self._session = onnx_session(onnx_path, self.n_threads)  # set last: it marks the model as loaded
