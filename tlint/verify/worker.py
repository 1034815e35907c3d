"""The child process of `tlint verify`: `python -m tlint.verify.worker REQUEST REPORT_FD ...`
(started by tlint/verify/child.py, which sets its limits first).

It reads the options (JSON) from REQUEST, imports the user's model, runs the probes and
reports each stage as a JSON line on the inherited report pipe (`verify`'s events). The
parent checks each event; what user code prints goes to another pipe, of which it keeps the end."""

from __future__ import annotations

import inspect
import math
import sys
import time
from pathlib import Path
from typing import Any

from tlint.verify.options import VerifyOptions


def _classes(model, roots) -> list[dict]:
    """Where each class of the model's modules (and their bases) is defined, with its module
    paths; and the other classes of the same source modules (no paths), so findings in them
    are known not to belong to this model."""
    by_class: dict[type, dict | None] = {}
    for path, module in model.named_modules():
        for cls in type(module).__mro__:  # a method inherited from a base class runs here too
            if cls.__module__.split(".")[0] in ("torch", "builtins"):
                continue
            if cls not in by_class:
                by_class[cls] = _where_defined(cls, roots)
            entry = by_class[cls]
            if entry is not None:
                entry["paths"].append(path or "(model)")
    for module_name in {cls.__module__ for cls, entry in by_class.items() if entry is not None}:
        for obj in list(vars(sys.modules.get(module_name, object)).values()):
            if inspect.isclass(obj) and obj.__module__ == module_name and obj not in by_class:
                by_class[obj] = _where_defined(obj, roots)
    return [entry for entry in by_class.values() if entry is not None]


def _where_defined(cls: type, roots) -> dict | None:
    """Where the user's class is defined; None for a class outside the user's tree (a
    library's: `tlint check` never reads it, so no finding can name it, and reading its
    source class by class is slow for big modules such as a Hugging Face modeling file)."""
    from tlint.verify.loading import _inside

    try:
        file = inspect.getsourcefile(cls)
        if file is None or not _inside(Path(file), roots):
            return None
        lines, start = inspect.getsourcelines(cls)
    except (TypeError, OSError):
        return None
    return {"name": cls.__qualname__, "file": str(Path(file).resolve()), "start": start,
            "end": start + len(lines) - 1, "paths": []}


def _is_causal(model, options: VerifyOptions, roots) -> tuple[bool | None, str]:
    """The configured `causal`; else evidence from the class verified, never from the other
    classes of its file: for a class in the user's tree (or one of its base classes there, or
    a module class the model holds), its own next-token loss, `generate` loop or causal
    attention name (`ModelView.class_causal_evidence`); for a class defined outside it (a
    library's, which `tlint check` never reads), a name containing one of the `causal-names`;
    a known encoder class name makes it not causal; then its uses in the project's files
    (`_uses_causal`). Returns (causal, why); (None, why) when no evidence decides."""
    if options.causal is not None:
        return options.causal, "configured"
    from tlint.verify.loading import _inside

    held = [type(module) for _, module in model.named_modules()]
    for cls in [*type(model).__mro__, *held[1:]]:
        if cls.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        try:
            file = inspect.getsourcefile(cls)
        except TypeError:
            file = None
        if file and _inside(Path(file), roots):
            evidence = _class_causal_evidence(Path(file).resolve(), cls.__name__, tuple(options.causal_names))
            if evidence:
                return True, evidence
        elif cls in type(model).__mro__ and any(name in cls.__name__ for name in options.causal_names):
            return True, f"the library class name `{cls.__name__}` (causal-names)"
    encoder = _encoder_class(model)
    if encoder is not None:
        return False, f"the class name `{encoder}`: an encoder"
    use = _uses_causal(model, options, roots)
    if use is not None:
        return True, use
    return None, "no causal evidence for the class verified, in its source or in its uses (as TL207 decides)"


def _uses_causal(model, options: VerifyOptions, roots) -> str | None:
    """A use of the model as a causal one in the project's files that import its factory's
    module or its class's (a `.generate(...)` call or a next-token loss in a function that
    names the factory or the class: `ModelView.uses_causal_evidence`)."""
    from tlint.verify.loading import _inside
    from tlint.verify.matching import importers

    module_name = options.model.partition(":")[0]
    files = set()
    for name in (module_name, type(model).__module__):
        spec_file = getattr(sys.modules.get(name), "__file__", None)
        if spec_file and _inside(Path(spec_file), roots):
            files.add(Path(spec_file).resolve())
    if not files:
        return None
    names = (options.model.partition(":")[2].rpartition(".")[2], type(model).__name__)
    for path in sorted(files | importers(sorted(files), list(roots))):
        view = _view(path)
        evidence = view.uses_causal_evidence(names) if view is not None else None
        if evidence is not None:
            return f"{evidence.reason} in {path.name}"
    return None


# Class names of models known to be bidirectional encoders (their causal-leak is not asked).
_ENCODER_WORDS = ("Encoder", "MaskedLM", "Bert", "Roberta", "Electra", "ViT", "Vit", "Deit", "ForImageClassification")
_NOT_ENCODER_WORDS = ("Decoder", "Seq2Seq", "CausalLM", "LMHead", "ConditionalGeneration", "GPT")


def _encoder_class(model) -> str | None:
    for cls in type(model).__mro__:
        if cls.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        name = cls.__name__
        if any(word in name for word in _NOT_ENCODER_WORDS):
            return None
        if any(word in name for word in _ENCODER_WORDS):
            return name
    return None


def _measure_causal(ctx) -> tuple[bool, str]:
    """Whether outputs before t ignore tokens from t on (the causal-leak test, run as a
    measurement: a model nobody declared causal and no evidence shows causal). A model that
    sees later tokens may be bidirectional by design or causal with a broken mask: that is
    `inconclusive`, never a verdict either way."""
    from tlint.verify.probes import CausalLeakProbe

    ctx.causal = True
    try:
        result = CausalLeakProbe().run(ctx)
    finally:
        ctx.causal = False
    if result.status == "pass":
        return True, f"measured: outputs before t ignore the tokens from t on (causal-leak {result.figure})"
    if result.status == "fail":
        return False, (f"inconclusive: only the model's own behaviour could tell, and its outputs before t change "
                       f"with later tokens (causal-leak {result.figure}): a bidirectional model, or a causal one "
                       "whose mask is broken; set `causal = true` in [tool.tlint.verify] (or --causal) if it must "
                       "be causal, `causal = false` if it is not")
    return False, f"not measured: {result.detail}"


_VIEWS: dict[Path, Any] = {}


def _view(path: Path):
    """The linter's model view of a file (None when it cannot be read or parsed)."""
    if path not in _VIEWS:
        import libcst as cst

        from tlint.engine import parse_source, read_text
        from tlint.source import FileIndex
        from tlint.views.model import ModelView

        text = read_text(path, str(path))
        module = parse_source(text, str(path)) if isinstance(text, str) else None
        _VIEWS[path] = ModelView(FileIndex(module)) if type(module) is cst.Module else None
    return _VIEWS[path]


def _class_causal_evidence(path: Path, name: str, causal_names: tuple[str, ...]) -> str | None:
    """Why the class `name` of `path` is causal, from its own body (the linter's view)."""
    view = _view(path)
    if view is None:
        return None
    try:
        evidence = view.class_causal_evidence(name, causal_names)
    except RecursionError:
        return None
    return f"{name}: {evidence.reason}" if evidence is not None else None


DEPTH_SETTINGS = ("n_layer", "n_layers", "num_layers", "num_hidden_layers", "depth", "n_blocks", "num_blocks")


def _rebuild_deeper(model, options: VerifyOptions, roots, depth: int):
    """The model built again, `depth` blocks deep, through the factory's layer-count keyword
    argument (read from the factory's signature, or the model class's when the factory
    passes **kwargs on); None when there is none or the build fails."""
    import torch

    from tlint.verify.loading import UserCodeError, build_model, import_object

    factory = import_object(options.model, "model", roots)
    setting = _depth_setting(factory) or (_depth_setting(type(model)) if _passes_kwargs(factory) else None)
    if setting is None:
        return None
    deeper = VerifyOptions(**{**vars(options), "model_kwargs": {**options.model_kwargs, setting: depth}})
    torch.manual_seed(options.seed)
    try:
        rebuilt = build_model(deeper, roots).to(options.device).eval()
    except UserCodeError:
        return None
    return rebuilt, (setting, depth)


def _depth_setting(callable_) -> str | None:
    try:
        params = inspect.signature(callable_).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in DEPTH_SETTINGS if name in params), None)


def _passes_kwargs(callable_) -> bool:
    try:
        return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(callable_).parameters.values())
    except (TypeError, ValueError):
        return False


def _load(options: VerifyOptions, roots) -> tuple:
    """Build `options.model` and the probes' context for it: its device, vocabulary, call
    style and causality. Returns (model, ctx, causal_reason, causal_measured)."""
    import torch

    from tlint.verify.loading import UserCodeError, build_model, choose_caller, infer_vocab_size
    from tlint.verify.probes import ProbeContext

    torch.manual_seed(options.seed)
    model = build_model(options, roots)
    try:
        model.to(options.device)
    except (RuntimeError, AssertionError) as exc:
        raise UserCodeError("device", f"cannot move the model to `{options.device}`: {exc} "
                            "(set `device` or --device to one this machine has, e.g. cpu)") from None
    model.eval()
    vocab = options.vocab_size or infer_vocab_size(model)
    if vocab is None:
        raise UserCodeError("config", "cannot infer the vocabulary size: the model has no nn.Embedding (the "
                            "probes feed token ids); set `vocab-size` in [tool.tlint.verify] or --vocab-size")
    if not 0 <= options.pad_token_id < vocab:
        raise UserCodeError("config", f"pad-token-id {options.pad_token_id} is outside the vocabulary "
                            f"(size {vocab}); set `pad-token-id`")
    known, causal_reason = _is_causal(model, options, roots)
    # (no caller yet: `choose_caller` below needs the context's batch)
    ctx = ProbeContext(model, None, vocab_size=vocab, pad_token_id=options.pad_token_id, seq_len=options.seq_len,  # type: ignore[arg-type]
                       batch_size=options.batch_size, causal=bool(known), padding_side=options.padding_side,
                       device=options.device, seed=options.seed)
    ids, keep = ctx.padded_batch(ctx.generator(0))
    ctx.caller = choose_caller(model, options, roots, ids.to(options.device), keep.to(options.device), vocab)
    causal_measured = False
    if known is None:  # neither declared, nor the class's evidence, nor a known encoder, nor its uses: ask the model
        ctx.causal, causal_reason = _measure_causal(ctx)
        causal_measured = True
    return model, ctx, causal_reason, causal_measured


def _data_ab_on_its_model(probe, options: VerifyOptions, roots, ctx) -> tuple:
    """data-ab on `data-ab-model` (README "tlint verify"): the model the loaders feed when it
    is not `model`, or a small reference model known to be sound, so that a bug of `model`
    cannot pass for a data bug. It is built and called like `model` (its own vocabulary, call
    style and causality: `vocab-size`, `call` and `causal` are `model`'s), with the same
    loaders, optimiser settings, seed and pad id. Returns (its context, what it is, the
    result); a model that cannot be built or called makes the probe skip with the reason."""
    from tlint.verify.loading import UserCodeError

    own = VerifyOptions(**{**vars(options), "model": options.data_ab_model, "model_kwargs":
                           options.data_ab_model_kwargs, "vocab_size": None, "call": None, "causal": None,
                           "instantiate": False})
    try:
        model, ab_ctx, causal_reason, _ = _load(own, roots)
    except UserCodeError as exc:
        return ctx, None, probe.skip(f"could not run: the data-ab model `{options.data_ab_model}` (`data-ab-model`): "
                                     f"{exc}")
    ab_ctx.training, ab_ctx.data = getattr(ctx, "training", None), ctx.data
    ab_ctx.artifacts = None
    info = {"factory": options.data_ab_model, "class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()), "call": ab_ctx.caller.style,
            "causal": ab_ctx.causal, "causal_reason": causal_reason, "vocab_size": ab_ctx.vocab_size}
    return ab_ctx, info, probe.run(ab_ctx)


def verify(options: VerifyOptions, emit=None) -> dict:
    """Load the model and run `options.probes`; returns `{"model", "probes", "classes"}`.
    `emit(event)` (the child process writes each to its progress file) is called with
    `{"event": "ready"}` once torch is imported (the user's code runs from here on),
    `{"event": "loaded", "model", "classes"}` once the model answers a call, then
    `{"event": "start", "probe", "template"}` and `{"event": "done", "probe", "entry"}` around
    each probe, so the parent can stop a probe that hangs and go on with the others."""
    from tlint.verify.loading import UserCodeError, import_roots, prepare_sys_path

    emit = emit or (lambda event: None)
    prepare_sys_path(options)
    import torch

    from tlint.verify.probes import PROBE_CLASSES
    from tlint.verify.training_probes import TRAINING_PROBE_CLASSES, training_settings

    emit({"event": "ready"})  # torch is imported: the user's code starts (its limit starts now)

    roots = import_roots(options)
    torch.set_num_threads(1)  # tiny models: threads cost more than they save, and runs stay reproducible
    model, ctx, causal_reason, causal_measured = _load(options, roots)
    vocab, causal = ctx.vocab_size, ctx.causal
    ctx.rebuild_deeper = lambda depth: _rebuild_deeper(model, options, roots, depth)
    ctx.artifacts = options.artifacts  # where attention-maps may write PNG files (None: nowhere)
    if any(name in TRAINING_PROBE_CLASSES for name in options.probes):
        ctx.training = training_settings(options, roots, emit)
    ctx.data = options.data  # data-ab: the loaders to train on (None: not configured)
    model_info = {
        "factory": options.model, "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()), "call": ctx.caller.style,
        "convention": ctx.caller.convention, "causal": causal, "causal_reason": causal_reason,
        "causal_measured": causal_measured, "vocab_size": vocab,
        "causal_inconclusive": causal_measured and causal_reason.startswith("inconclusive"),
        "layout": "sequence-first" if ctx.caller.seq_first else "batch-first",
    }
    classes = _classes(model, roots)
    emit({"event": "loaded", "model": model_info, "classes": classes})
    probes = []
    for name in options.probes:
        torch.manual_seed(options.seed)
        probe = (PROBE_CLASSES.get(name) or TRAINING_PROBE_CLASSES[name])()
        emit({"event": "start", "probe": name, "template": probe.skip("").to_json()})
        started = time.perf_counter()
        run_ctx, own = ctx, None
        try:
            if name == "causal-leak" and causal_measured and not causal:
                result = probe.skip(causal_reason if causal_reason.startswith("inconclusive")
                                    else f"the model is not causal ({causal_reason})")
            elif name == "data-ab" and options.data_ab_model:
                run_ctx, own, result = _data_ab_on_its_model(probe, options, roots, ctx)
            else:
                result = probe.run(ctx)
        except UserCodeError:
            raise
        except Exception as exc:  # the model cannot run this probe's inputs: not checkable
            result = probe.skip(f"could not run: {type(exc).__name__}: {exc}")
        entry = result.to_json()
        entry["extra"] = result.extra
        _settle(probe, run_ctx, result, entry)
        _evidence(name, run_ctx, entry)
        if own is not None:  # which model data-ab trained (`data-ab-model`), in its detail and JSON `ab`
            entry["extra"]["model"] = own
            entry["detail"] += f"; the model trained: {own['class']} of data-ab-model `{own['factory']}`"
        entry["seconds"] = round(time.perf_counter() - started, 3)
        probes.append(entry)
        emit({"event": "done", "probe": name, "entry": entry})
    return {"model": model_info, "probes": probes, "classes": classes}


# A figure within this factor of its tolerance is near it: the probe runs on two more seeds.
NEAR = 3.0


def _settle(probe, ctx, result, entry: dict) -> None:
    """A pass or fail whose figure sits near the tolerance is decided by three seeds: the
    median run's verdict (the majority), the figures and their spread in `entry["seeds"]`."""
    figure, tolerance = result.figure, probe.tolerance
    if result.status not in ("pass", "fail") or not tolerance or figure is None or not math.isfinite(figure) \
            or not tolerance / NEAR <= figure <= tolerance * NEAR:
        return
    import torch

    runs = [result]
    seed = ctx.seed
    try:
        for extra_seed in (seed + 1, seed + 2):
            ctx.seed = extra_seed
            torch.manual_seed(extra_seed)
            runs.append(type(probe)().run(ctx))
    except Exception:  # noqa: BLE001  (the first seed's verdict stands)
        return
    finally:
        ctx.seed = seed
    figures = [r.figure for r in runs]
    ordered = sorted(range(len(runs)), key=lambda i: figures[i] if figures[i] is not None else math.inf)
    median = runs[ordered[1]]
    status = max(("pass", "fail"), key=lambda s: sum(r.status == s for r in runs))
    entry["seeds"] = {"seeds": [seed, seed + 1, seed + 2], "figures": figures, "median": median.figure,
                      "spread": float(f"{max(figures) - min(figures):.4g}"), "statuses": [r.status for r in runs]}
    entry["status"], entry["figure"] = status, median.figure
    if status != result.status:
        entry["detail"] = median.detail if median.status == status else entry["detail"]
        entry["module"] = median.module if median.status == status else entry["module"]


def _evidence(name: str, ctx, entry: dict) -> None:
    """What the verdicts need beyond the probe's own figure: the positive control of a
    passing probe (`entry["control"]`). (attention-entropy measures the effective scale itself.)"""
    from tlint.verify.controls import run_control

    if entry["status"] == "pass":
        control = run_control(name, ctx)
        if control is not None:
            entry["control"] = control


def main(argv: list[str]) -> int:
    """`REQUEST REPORT_FD PARENT_PID LIMIT_MIB` (tlint/verify/child.py): options in, one JSON
    event per line out on the report pipe (see `verify`), ending with `{"event": "end"}` or
    `{"event": "error", "kind", "message"}`."""
    from tlint.verify.child import start_child

    request, reporter = start_child(argv)
    options = VerifyOptions.from_json(request.read_text(encoding="utf-8"))
    from tlint.verify.loading import UserCodeError

    emit = reporter.emit

    try:
        verify(options, emit)
        event = {"event": "end"}
    except UserCodeError as exc:
        event = {"event": "error", "kind": exc.kind, "message": str(exc)}
    except MemoryError:
        event = {"event": "error", "kind": "memory", "message": "the model does not fit in memory: lower the "
                 "sizes in `model-kwargs`, `batch-size` or `seq-len`"}
    except Exception as exc:
        if type(exc).__name__ != "OutOfMemoryError":
            raise
        event = {"event": "error", "kind": "memory", "message": f"out of memory on `{options.device}`: lower the "
                 "sizes in `model-kwargs`, `batch-size` or `seq-len`, or use --device cpu"}
    emit(event)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
