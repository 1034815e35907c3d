"""The child process of `tlint verify`: `python -m tlint.verify.worker REQUEST RESULT`.

It reads the options (JSON) from REQUEST, imports the user's model, runs the probes and
writes JSON to RESULT: `{"model", "probes", "classes"}` or `{"error": {"kind", "message"}}`.
The parent reads only RESULT, so whatever user code prints does not matter."""

from __future__ import annotations

import inspect
import json
import sys
import time
from pathlib import Path

from tlint.verify.options import VerifyOptions


def _classes(model) -> list[dict]:
    """Where each class of the model's modules (and their bases) is defined, with its module
    paths; and the other classes of the same source modules (no paths), so findings in them
    are known not to belong to this model."""
    by_class: dict[type, dict] = {}
    for path, module in model.named_modules():
        for cls in type(module).__mro__:  # a method inherited from a base class runs here too
            if cls.__module__.split(".")[0] in ("torch", "builtins"):
                continue
            if cls not in by_class:
                by_class[cls] = _where_defined(cls)
            if by_class[cls] is not None:
                by_class[cls]["paths"].append(path or "(model)")
    for module_name in {cls.__module__ for cls, entry in by_class.items() if entry is not None}:
        for obj in list(vars(sys.modules.get(module_name, object)).values()):
            if inspect.isclass(obj) and obj.__module__ == module_name and obj not in by_class:
                by_class[obj] = _where_defined(obj)
    return [entry for entry in by_class.values() if entry is not None]


def _where_defined(cls: type) -> dict | None:
    try:
        file = inspect.getsourcefile(cls)
        lines, start = inspect.getsourcelines(cls)
    except (TypeError, OSError):
        return None
    if file is None:
        return None
    return {"name": cls.__qualname__, "file": str(Path(file).resolve()), "start": start,
            "end": start + len(lines) - 1, "paths": []}


def _is_causal(model, options: VerifyOptions) -> bool:
    """The configured `causal`, else whether the model's class name contains one of the
    `causal-names` (GPT, CausalLM, ...), as the static rules decide."""
    if options.causal is not None:
        return options.causal
    return any(name in type(model).__name__ for name in options.causal_names)


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


def verify(options: VerifyOptions) -> dict:
    from tlint.verify.loading import (
        UserCodeError,
        build_model,
        choose_caller,
        import_roots,
        infer_vocab_size,
        prepare_sys_path,
    )

    prepare_sys_path(options)
    import torch

    from tlint.verify.probes import PROBE_CLASSES, ProbeContext

    roots = import_roots(options)
    torch.set_num_threads(1)  # tiny models: threads cost more than they save, and runs stay reproducible
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
        raise UserCodeError("config", "cannot infer the vocabulary size: the model has no nn.Embedding; "
                            "set `vocab-size` in [tool.tlint.verify] or --vocab-size")
    if not 0 <= options.pad_token_id < vocab:
        raise UserCodeError("config", f"pad-token-id {options.pad_token_id} is outside the vocabulary "
                            f"(size {vocab}); set `pad-token-id`")
    causal = _is_causal(model, options)
    ctx = ProbeContext(model, None, vocab_size=vocab, pad_token_id=options.pad_token_id, seq_len=options.seq_len,
                       batch_size=options.batch_size, causal=causal, padding_side=options.padding_side,
                       device=options.device, seed=options.seed)
    ids, keep = ctx.padded_batch(ctx.generator(0))
    ctx.caller = choose_caller(model, options, roots, ids.to(options.device), keep.to(options.device))
    ctx.rebuild_deeper = lambda depth: _rebuild_deeper(model, options, roots, depth)
    probes = []
    for name in options.probes:
        torch.manual_seed(options.seed)
        started = time.perf_counter()
        probe = PROBE_CLASSES[name]()
        try:
            result = probe.run(ctx)
        except UserCodeError:
            raise
        except Exception as exc:  # the model cannot run this probe's inputs: not checkable
            result = probe.skip(f"could not run: {type(exc).__name__}: {exc}")
        entry = result.to_json()
        entry["extra"] = result.extra
        entry["seconds"] = round(time.perf_counter() - started, 3)
        probes.append(entry)
    model_info = {
        "factory": options.model, "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()), "call": ctx.caller.style,
        "convention": ctx.caller.convention, "causal": causal, "vocab_size": vocab,
    }
    return {"model": model_info, "probes": probes, "classes": _classes(model)}


def main(argv: list[str]) -> int:
    request, result_path = Path(argv[0]), Path(argv[1])
    sys.dont_write_bytecode = True
    options = VerifyOptions.from_json(request.read_text(encoding="utf-8"))
    from tlint.verify.loading import UserCodeError

    try:
        result = verify(options)
    except UserCodeError as exc:
        result = {"error": {"kind": exc.kind, "message": str(exc)}}
    except MemoryError:
        result = {"error": {"kind": "memory", "message": "the model does not fit in memory: lower the sizes in "
                            "`model-kwargs`, `batch-size` or `seq-len`"}}
    except Exception as exc:
        if type(exc).__name__ == "OutOfMemoryError":
            result = {"error": {"kind": "memory", "message": f"out of memory on `{options.device}`: lower the sizes "
                                "in `model-kwargs`, `batch-size` or `seq-len`, or use --device cpu"}}
        else:
            raise
    result_path.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
