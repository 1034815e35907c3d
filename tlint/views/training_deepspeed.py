"""The training view's DeepSpeed configs (`TrainingView.deepspeed_configs`): dict literals
in the file, and JSON files it names, read through the context (`DeepSpeedConfig`). A
mixin of `tlint.views.training.TrainingView`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cache import digest_bytes
from tlint.cst import dotted_name, get_arg, last_name, literal_value
from tlint.views.training_common import UNKNOWN, Event

if TYPE_CHECKING:
    from tlint.source import FileIndex

# Names that say a DeepSpeed or Megatron-LM back-end is configured outside the file
# (`accelerate launch --config_file ...`): it clips by that configuration.
# The placeholders count only when imported from accelerate (a local class of the same name
# is not one); the plugin attributes and keywords by their names.
_EXTERNAL_BACKEND_PLACEHOLDERS = frozenset({"DummyOptim", "DummyScheduler", "MegatronLMDummyScheduler"})
_EXTERNAL_BACKEND_NAMES = frozenset({"deepspeed_plugin", "megatron_lm_plugin"})
_DEEPSPEED_KEYS = frozenset(
    {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "gradient_clipping"}
)


@dataclass(frozen=True, eq=False)
class DeepSpeedConfig:
    """A DeepSpeed config: a dict literal in the file, or a JSON file it names."""

    node: cst.CSTNode
    values: dict[str, Any]

    def clips(self) -> bool:
        value = self.values.get("gradient_clipping", 0)
        if value is UNKNOWN or isinstance(value, str):  # "auto": filled from max_grad_norm
            return True
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

    def warms_up(self) -> bool:
        scheduler = self.values.get("scheduler")
        if scheduler is UNKNOWN:
            return True
        if not isinstance(scheduler, dict):
            return False
        kind = scheduler.get("type", UNKNOWN)
        if kind is UNKNOWN or kind == "auto":
            return True
        if not isinstance(kind, str) or ("warmup" not in kind.lower() and kind != "OneCycle"):
            return False
        params = scheduler.get("params", {})
        steps = params.get("warmup_num_steps", UNKNOWN) if isinstance(params, dict) else UNKNOWN
        return not (isinstance(steps, (int, float)) and steps == 0)


class TrainingDeepSpeed:
    """`TrainingView`'s DeepSpeed configs."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts
        index: FileIndex
        _read_input: Callable[[Path], bytes | None] | None
        _deepspeed_cache: dict[Path | None, tuple[list[DeepSpeedConfig], int]]

        def calls_of(self, family: str) -> list[cst.Call]: ...
        def literal(self, expr: cst.BaseExpression | None, default: Any = ...) -> Any: ...
        def role(self, expr: cst.BaseExpression | None, roles: dict[str, str] | None = None) -> str | None: ...

    # --- DeepSpeed ----------------------------------------------------------------------

    def deepspeed_configs(self, folder: Path | None) -> tuple[list[DeepSpeedConfig], int]:
        """The DeepSpeed configs this file shows (dict literals, JSON files next to it), and
        how many DeepSpeed set-ups take a config that cannot be read statically."""
        cached = self._deepspeed_cache.get(folder)
        if cached is not None:
            return cached
        configs: list[DeepSpeedConfig] = []
        seen: set[int] = set()
        unresolved = 0
        for node in self.index.assignments:
            value = node.value if type(node) in (cst.Assign, cst.AnnAssign) else None
            if value is not None and _DEEPSPEED_KEYS & _dict_keys(value):
                values = self._dict_values(value)
                if values is None:  # `dict(**base, zero_optimization=...)`: what the spread adds is unknown
                    unresolved += 1
                    continue
                configs.append(DeepSpeedConfig(value, values))
                seen.add(id(value))
        sources = [
            ("deepspeed_initialize", ("config", "config_params")),
            ("deepspeed_plugin", ("hf_ds_config",)),
            ("deepspeed_strategy", ("config",)),
            ("training_arguments", ("deepspeed",)),
        ]
        for family, keywords in sources:
            for call in self.calls_of(family):
                arg = next((get_arg(call, k) for k in keywords if get_arg(call, k) is not None), None)
                if family == "deepspeed_plugin" and arg is None:
                    clip = get_arg(call, "gradient_clipping")
                    if clip is None:
                        unresolved += 1
                    else:
                        configs.append(DeepSpeedConfig(clip, {"gradient_clipping": self.literal(clip.value)}))
                    continue
                if arg is None:
                    unresolved += family == "deepspeed_initialize"
                    continue
                config = self._deepspeed_config(arg.value, folder)
                if config is None:
                    unresolved += 1
                elif id(config.node) not in seen:
                    configs.append(config)
                    seen.add(id(config.node))
        if self.index.identifiers & _EXTERNAL_BACKEND_NAMES or self._accelerate_placeholder():
            unresolved += 1  # accelerate's DeepSpeed/Megatron-LM plugin, configured at launch
        self._deepspeed_cache[folder] = configs, unresolved
        return configs, unresolved

    def _accelerate_placeholder(self) -> bool:
        """`DummyOptim`/`DummyScheduler` imported from accelerate (or called by their
        qualified name), not a class of this file that shares the name."""
        index = self.index
        if not index.identifiers & _EXTERNAL_BACKEND_PLACEHOLDERS:
            return False
        if any(q.startswith("accelerate") and q.rsplit(".", 1)[-1] in _EXTERNAL_BACKEND_PLACEHOLDERS
               for q in index.imports.aliases.values()):
            return True
        for call in index.calls:
            name = index.qualify(call.func) or ""
            if name.startswith("accelerate") and name.rsplit(".", 1)[-1] in _EXTERNAL_BACKEND_PLACEHOLDERS:
                return True
        return False

    def is_engine_step(self, event: Event) -> bool:
        """An optimiser step taken by a DeepSpeed engine (`model_engine.step()`), which clips
        by its config."""
        func = event.node.func if type(event.node) is cst.Call else None
        return type(func) is cst.Attribute and self.role(func.value) == "engine"

    def _deepspeed_config(self, expr: cst.BaseExpression, folder: Path | None) -> DeepSpeedConfig | None:
        values = self._dict_values(expr)
        if values is not None:
            return DeepSpeedConfig(expr, values)
        if type(expr) in (cst.Name, cst.Attribute):
            # `config=ds_config`, `config=self.ds_config`: the one dict literal assigned to that name
            name = last_name(expr) or ""  # never empty for a Name or Attribute
            assigned = [v for v in self._dict_assignments.get(name, ()) if v is not None]
            if len(assigned) == 1 and len(self._dict_assignments[name]) == 1:
                values = self._dict_values(assigned[0])
                # a `dict(**base, ...)` call: what the spread adds is unknown (unresolved)
                return DeepSpeedConfig(assigned[0], values) if values is not None else None
        path = self.literal(expr)
        if isinstance(path, str) and path.endswith(".json") and folder is not None and self._read_input is not None:
            loaded = _read_json(folder, path, self._read_input)
            if loaded is not None:
                return DeepSpeedConfig(expr, loaded)
        return None

    @cached_property
    def _dict_assignments(self) -> dict[str, list[cst.BaseExpression | None]]:
        """Last name of an assignment target -> its values: the dict literal, or None."""
        out: dict[str, list[cst.BaseExpression | None]] = {}
        for node in self.index.assignments:
            if type(node) is cst.Assign:
                targets = [t.target for t in node.targets]
            elif type(node) is cst.AnnAssign and node.value is not None:
                targets = [node.target]
            else:
                continue
            value = node.value if _dict_keys(node.value) or type(node.value) is cst.Dict else None
            for target in targets:
                target_name = last_name(target)
                if target_name:
                    out.setdefault(target_name, []).append(value)
        return out

    def _dict_values(self, expr: cst.BaseExpression | None, depth: int = 0) -> dict[str, Any] | None:
        """A dict literal (or `dict(k=v)`) as a Python dict, UNKNOWN for non-literal leaves."""
        if depth > 6:
            return None
        if type(expr) is cst.Dict:
            out: dict[str, Any] = {}
            for element in expr.elements:
                if type(element) is not cst.DictElement:
                    continue
                key = literal_value(element.key, UNKNOWN)
                if isinstance(key, str):
                    out[key] = self._leaf(element.value, depth)
            return out
        if type(expr) is cst.Call and dotted_name(expr.func) == "dict" and all(a.keyword for a in expr.args):
            return {a.keyword.value: self._leaf(a.value, depth) for a in expr.args}  # type: ignore[union-attr]  # all keywords
        return None

    def _leaf(self, expr: cst.BaseExpression, depth: int) -> Any:
        nested = self._dict_values(expr, depth + 1)
        return nested if nested is not None else self.literal(expr)


def _dict_keys(expr: cst.BaseExpression | None) -> set[str]:
    """The literal string keys of a dict literal or `dict(k=v)` call (empty otherwise)."""
    if type(expr) is cst.Dict:
        return {key for e in expr.elements if type(e) is cst.DictElement
                for key in (literal_value(e.key, UNKNOWN),) if isinstance(key, str)}
    if type(expr) is cst.Call and dotted_name(expr.func) == "dict":
        return {a.keyword.value for a in expr.args if a.keyword is not None}
    return set()


# Parsed once per content: keyed by the bytes' digest, so a long-lived process (a language
# server, the tests) sees an edited config, and the cache records what was used.
_JSON_CACHE: dict[str, dict[str, Any] | None] = {}


def _read_json(folder: Path, name: str, read_input: Callable[[Path], bytes | None]) -> dict[str, Any] | None:
    """A JSON config named by a literal path, relative to the script's folder (a regular
    file under 2 MB; anything else is no config), read through the context."""
    path = Path(name)
    if not path.is_absolute():
        path = folder / path
    data = read_input(path)
    if data is None:
        return None
    digest = digest_bytes(data)
    if digest in _JSON_CACHE:
        return _JSON_CACHE[digest]
    try:
        parsed = json.loads(data.decode("utf-8"))
        loaded = parsed if isinstance(parsed, dict) else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        loaded = None
    if len(_JSON_CACHE) > 256:
        _JSON_CACHE.clear()
    _JSON_CACHE[digest] = loaded
    return loaded
