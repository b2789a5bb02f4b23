"""Loading a packaged ONNX encoder and its tokenizer the same way for every model that uses one
(the embedder, the NLI stage): CPU only, a fixed thread count, onnxruntime's own logging quiet."""

from __future__ import annotations

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
