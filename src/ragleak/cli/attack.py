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
    from ragleak.attacks.views import read_view

    return None if path is None else read_view(path)


def _params(text: Optional[str]) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--params is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError("--params must be a JSON object of parameters")
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
                         "'$env:NAME' in the value reads an environment variable (quote it: 'Authorization: "
                         "Bearer $env:RAG_TOKEN'); credentials are masked in everything written")
ShapeOpt = typer.Option("json", "--shape", help="request shape for --endpoint: json (the --request-template body) "
                        "or openai (chat-completions: history as messages, answer from choices[0].message.content)")
TemplateOpt = typer.Option(None, "--request-template", help="JSON request body for --endpoint (shape json), with "
                           '{query} and "{history}" or "{messages}"; default {"query": "{query}", "history": "{history}"}')
AnswerPathOpt = typer.Option(None, "--answer-path", help="JSON path to the answer in the endpoint's response "
                             "(default: answer; openai: choices[0].message.content)")
IdsPathOpt = typer.Option(None, "--retrieved-ids-path", help="JSON path to the source ids in the endpoint's response")
ApiModelOpt = typer.Option(None, "--api-model", help="the 'model' field of an openai-shaped request")


def endpoint_config(url: str, shape: str, request_template: Optional[str], answer_path: Optional[str],
                    retrieved_ids_path: Optional[str], api_model: Optional[str], timeout: float, retries: int,
                    header: Optional[list[str]], stop_after: int = 5):
    """The endpoint the options describe, as the ``TargetConfig`` ``build_target`` reads (one place
    for ``ask`` and ``attack``); ``stop_after`` 0: the session never stops on errors."""
    from ragleak.config import TargetConfig
    from ragleak.pipeline.target import SHAPES

    if shape not in SHAPES:
        raise typer.BadParameter(f"--shape must be one of {', '.join(SHAPES)}")
    window = TargetConfig.model_fields["error_window"].default if stop_after else 0  # 0: no error-rate stop
    # Built without TargetConfig's validation, which refuses credentials written literally: that rule
    # keeps them out of a grid's stored plan, and this config is never stored (the transcript names
    # the target with its credentials masked). HttpTarget checks every setting it is built with.
    return TargetConfig.model_construct(
        kind="http", url=url, shape=shape, request_template=request_template, answer_path=answer_path,
        retrieved_ids_path=retrieved_ids_path, api_model=api_model, headers=parse_headers(header), timeout_s=timeout,
        retries=retries, stop_after_failures=stop_after, error_window=window)


def attack_command(
    name: str = typer.Argument(..., help="attack name (ps, pm, canary, mi, rag-thief, deal, ikea)"),
    index: Optional[Path] = typer.Option(None, "--index", help="index directory (the built-in pipeline)"),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="attack an HTTP endpoint instead"),
    shape: str = ShapeOpt,
    request_template: Optional[str] = TemplateOpt,
    answer_path: Optional[str] = AnswerPathOpt,
    retrieved_ids_path: Optional[str] = IdsPathOpt,
    api_model: Optional[str] = ApiModelOpt,
    timeout: float = TimeoutOpt,
    retries: int = RetriesOpt,
    header: Optional[list[str]] = HeaderOpt,
    stop_after: int = typer.Option(5, "--stop-after", help="stop after this many failed queries in a row "
                                   "(--endpoint; 0: never); the transcript says why"),
    defense: str = typer.Option("none", "--defense", help="defense name, or path/to/file.py:Class "
                                "(built-in pipeline only)"),
    budget: Optional[int] = typer.Option(None, "--budget", help="query budget (default: the attack's)"),
    seed: int = typer.Option(0, "--seed", help="attack seed"),
    mode: str = typer.Option("single", "--mode", help="single: every query in a fresh session; multi: queries "
                             "chained into 3-turn conversations (history included)"),
    params: Optional[str] = typer.Option(None, "--params", help='attack parameters as JSON, e.g. \'{"turns": 2}\''),
    view: Optional[Path] = typer.Option(None, "--view", help="corpus view JSON (MI candidates and labels, canary "
                                        "secrets) or a canary manifest (`ragleak canary plant`)"),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="with --endpoint: the corpus the endpoint indexed, "
                                         "the ground truth of the extraction and PII metrics printed at the end"),
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
    from ragleak.measure import run_attack
    from ragleak.pipeline.build import build_target
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
        target = build_target(stack, endpoint_config(endpoint, shape, request_template, answer_path,
                                                     retrieved_ids_path, api_model, timeout, retries, header, stop_after))
        if mode == "multi" and not target.sends_history:  # type: ignore[attr-defined]
            raise typer.BadParameter('--mode multi needs a request that carries the history: "{history}" or '
                                     '"{messages}" in --request-template, or --shape openai')
        passages = []
    else:
        from ragleak.defenses import make_defense

        loaded = stack.load_index(index)
        # an audit: the defense's noise is seeded, at the stack config's seed as it always was (reproducible)
        ctx = stack.context(stack.config.seed)
        target, passages = build_target(stack, loaded, make_defense(defense), ctx=ctx), loaded.passages
    if corpus is not None:
        from ragleak.grid.scored import scoring_corpus

        passages = scoring_corpus(corpus, cfg)[0]
    # the transcript is written before it is measured: a long attack's queries outlive a metric that fails
    transcript, results = run_attack(attack, target, stack.context(seed), passages, budget=budget,
                                     corpus_view=corpus_view, mode=mode,  # type: ignore[arg-type]
                                     keep=lambda t: atomic_write_text(out, t.to_json()))
    summary = {"attack": transcript.attack, "out": str(out), "queries": len(transcript.queries),
               "stopped": transcript.stopped,
               "errors": transcript.errors, "extracted": len(transcript.extracted),
               "membership_scores": len(transcript.membership), "seconds": round(transcript.seconds, 2),
               "metrics": {k: r.model_dump(mode="json") for k, r in results.items()}}
    trained = transcript.scoring.get("asymmetry", {}).get("classifier")
    if trained is not None:
        summary["classifier"] = trained
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        from rich.console import Console

        from ragleak.cli.tables import metric_results_table, show

        console = Console()
        console.print(f"{summary['attack']}: {summary['queries']} queries ({summary['errors']} failed), "
                      f"{summary['extracted']} extracted items -> {summary['out']} in {summary['seconds']}s")
        show(console, metric_results_table(f"metrics over {len(transcript.answered)} answered queries", results))
        if not passages:
            console.print("no corpus given: extraction and PII metrics need --corpus (the corpus the endpoint indexed)",
                          highlight=False, soft_wrap=True)
        if trained is not None:
            if "error" in trained:
                line = f"classifier not trained: {trained['error']}"
            else:
                line = (f"classifier: trained on {len(trained['train_queries'])} queries, metrics on the "
                        f"{len(trained['test_queries'])} held out, saved to {trained.get('saved_to')}")
            console.print(line, markup=False)
    if transcript.stopped:
        sys.stderr.write(f"error: {transcript.attack}: {transcript.stopped}; transcript written to {out}\n")
        raise typer.Exit(1)
    if transcript.budget > 0 and not transcript.answered:
        # nothing was measured: a run that only failed must not pass for one that found no leakage
        first = next((q.error for q in transcript.queries if q.error), "no query was sent")
        sys.stderr.write(f"error: {transcript.attack}: 0 of {len(transcript.queries)} queries answered "
                         f"(first error: {first}); transcript written to {out}\n")
        raise typer.Exit(1)
