"""`ragleak attack NAME`: run one registered attack against the built-in stack or an HTTP endpoint
and write its transcript JSON (atomically)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ragleak.errors import ConfigError


def _read_view(path: Optional[Path]):
    from pydantic import ValidationError

    from ragleak.attacks.base import CorpusView

    if path is None:
        return None
    try:
        return CorpusView.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"corpus view file {path} does not exist") from exc
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a corpus view: {exc.errors()[0]['msg']}") from exc


def _params(text: Optional[str]) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--params is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError("--params must be a JSON object of attack parameters")
    return value


def parse_headers(values: Optional[list[str]]) -> dict[str, str]:
    """``--header "Name: value"`` options as a dict (credential headers are masked in all output)."""
    headers = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header must look like 'Name: value', got {name.strip() or item[:20]!r}...")
        headers[name.strip()] = value.strip()
    return headers


TimeoutOpt = typer.Option(60.0, "--timeout", help="seconds per HTTP attempt (--endpoint)")
RetriesOpt = typer.Option(2, "--retries", help="retries after a connection error, timeout, HTTP 5xx or 429, with "
                          "exponential backoff (0.5 s, doubling); other 4xx are not retried (--endpoint)")
HeaderOpt = typer.Option(None, "--header", help="an HTTP header 'Name: value' for --endpoint (repeatable); "
                         "credential headers and URL credentials are masked in everything written")


def attack_command(
    name: str = typer.Argument(..., help="attack name (ps, pm, canary, mi, rag-thief, deal, ikea)"),
    index: Optional[Path] = typer.Option(None, "--index", help="index directory (the built-in pipeline)"),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="attack an HTTP endpoint instead"),
    request_template: str = typer.Option('{"query": "{query}", "history": "{history}"}',
                                         help="JSON request body for --endpoint, with {query} (and {history})"),
    answer_path: str = typer.Option("answer", help="JSON path to the answer in the endpoint's response"),
    retrieved_ids_path: Optional[str] = typer.Option(None, help="JSON path to retrieved ids, if the endpoint exposes them"),
    timeout: float = TimeoutOpt,
    retries: int = RetriesOpt,
    header: Optional[list[str]] = HeaderOpt,
    defense: str = typer.Option("none", "--defense", help="defense name (built-in pipeline only)"),
    budget: Optional[int] = typer.Option(None, "--budget", help="query budget (default: the attack's)"),
    seed: int = typer.Option(0, "--seed", help="attack seed"),
    mode: str = typer.Option("single", "--mode", help="single: every query in a fresh session; multi: queries "
                             "chained into 3-turn conversations (history included)"),
    params: Optional[str] = typer.Option(None, "--params", help='attack parameters as JSON, e.g. \'{"turns": 2}\''),
    view: Optional[Path] = typer.Option(None, "--view", help="corpus view JSON (MI candidates and labels, canary secrets)"),
    out: Path = typer.Option(..., "--out", help="transcript JSON to write"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML stack config"),
    as_json: bool = typer.Option(False, "--json", help="print a machine-readable summary"),
    rebuild_cache: bool = typer.Option(False, "--rebuild-cache", help="move the generation cache aside and start a fresh one"),
    train: bool = typer.Option(False, "--train", help="asymmetry: fit the sentence classifier on a 7:3 query split of "
                               "this run's labelled sentences and report ESR/F1/AUC on the held-out 30%"),
    classifier_out: Optional[Path] = typer.Option(None, "--classifier-out", help="with --train: where the classifier "
                                                  "is saved (JSON arrays; default: beside --out)"),
) -> None:
    """Run one attack and write its transcript (every query, answer, trace, error and the attack's state)."""
    from ragleak.attacks import ATTACKS
    from ragleak.config import load_stack_config
    from ragleak.files import atomic_write_text, check_output_file
    from ragleak.stack import Stack

    if (index is None) == (endpoint is None):
        raise typer.BadParameter("give exactly one of --index or --endpoint")
    if budget is not None and budget < 0:
        raise typer.BadParameter("--budget must be >= 0")
    if mode not in ("single", "multi"):
        raise typer.BadParameter("--mode must be single or multi")
    check_output_file(out)  # before the first query: a bad --out must not cost the run its transcript
    attack_cls = ATTACKS.get(name)
    attack_params = _params(params)
    if train or classifier_out is not None:
        if "train" not in attack_cls.Params.model_fields:
            raise typer.BadParameter(f"--train/--classifier-out apply to a trainable attack (asymmetry), not {name}")
        if not train:
            raise typer.BadParameter("--classifier-out needs --train")
        attack_params.update(train=True, classifier_out=str(classifier_out or out.with_suffix(".classifier.json")))
    attack = attack_cls(**attack_params)
    corpus_view = _read_view(view)
    cfg = load_stack_config(config) if config else load_stack_config()
    stack = Stack(cfg)  # the target's parts and the attack's own models (attacker LLM, encoder) alike
    if rebuild_cache:
        stack.rebuild_cache()
    if endpoint is not None:
        from ragleak.rag.target import HttpTarget

        target = HttpTarget(endpoint, request_template=request_template, answer_path=answer_path,
                            retrieved_ids_path=retrieved_ids_path, timeout_s=timeout, retries=retries,
                            headers=parse_headers(header))
    else:
        from ragleak.defenses import make_defense
        from ragleak.rag.target import PipelineTarget

        target = PipelineTarget(stack.pipeline(stack.load_index(index), make_defense(defense)))
    transcript = attack.run(target, stack.context(seed), budget=budget, corpus_view=corpus_view, mode=mode)  # type: ignore[arg-type]
    atomic_write_text(out, transcript.to_json())
    summary = {"attack": transcript.attack, "out": str(out), "queries": len(transcript.queries),
               "errors": transcript.errors, "extracted": len(transcript.extracted),
               "membership_scores": len(transcript.membership), "seconds": round(transcript.seconds, 2)}
    trained = transcript.scoring.get("asymmetry", {}).get("classifier")
    if trained is not None:
        summary["classifier"] = trained
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        from rich.console import Console

        Console().print(f"{summary['attack']}: {summary['queries']} queries ({summary['errors']} failed), "
                        f"{summary['extracted']} extracted items -> {summary['out']} in {summary['seconds']}s")
        if trained is not None:
            if "error" in trained:
                line = f"classifier not trained: {trained['error']}"
            else:
                line = (f"classifier: trained on {len(trained['train_queries'])} queries, metrics on the "
                        f"{len(trained['test_queries'])} held out, saved to {trained.get('saved_to')}")
            Console().print(line, markup=False)
    if transcript.budget > 0 and not transcript.answered:
        # nothing was measured: a run that only failed must not pass for one that found no leakage
        first = next((q.error for q in transcript.queries if q.error), "no query was sent")
        sys.stderr.write(f"error: {transcript.attack}: 0 of {len(transcript.queries)} queries answered "
                         f"(first error: {first}); transcript written to {out}\n")
        raise typer.Exit(1)
