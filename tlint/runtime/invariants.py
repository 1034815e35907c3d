"""Run-time invariants of the training step, over a stream of events (README "Tracing a
training run"). No torch here: the events are plain values, produced by
`tlint/runtime/hooks.py` (torch's global hooks and a few wrapped functions), which both
`tlint trace` and `tlint.watch` install, so both check the same things the same way.

An event is a kind, the user's site (`Site`: the innermost frame of the user's code, chosen by
file path) and a few named values. `Invariants.observe(kind, site, **data)` takes one and
returns the violations it completes (each is also kept in `violations`, counted once per
rule and site). The kinds and their values:

- `forward`: a top-level module with parameters starts a forward: `model` (an id), `name`
  (its class), `training` (its flag), `eval_site` (where it was last switched to eval mode,
  if known).
- `backward`: a backward pass ended: `loss` (the grad_fn's name of the tensor), `model`,
  `training` (the last top-level model to run forward, and its mode now).
- `zero_grad`: an optimizer's gradients reset: `optimizer` (an id), `set_to_none`,
  `had_grads` (some parameter had a gradient). A module's `zero_grad()` is one such event
  for each optimizer holding some of the module's parameters.
- `step`: an optimizer step is about to run: `optimizer`, `empty` (no parameter has a
  gradient), `eval_models` (the models that ran forward in eval mode since this
  optimizer's last step and have trainable parameters in it: `{name, eval_site, callers}`
  each, `callers` the user's lines that led to the switch, innermost first),
  `lrs` (the rate of each parameter group).
- `stepped`: an optimizer step ran: `optimizer`.
- `scheduler`: an LR scheduler stepped (not its constructor's first step, no epoch
  argument): `optimizer`, `name`, `metric` (true for a scheduler stepped on a measured value,
  `ReduceLROnPlateau`, whose step before the optimizer's skips nothing).
- `scale`: GradScaler.scale on an enabled scaler; `unscale`: GradScaler.unscale_
  (`optimizer`); `scaler_step`: GradScaler.step (`optimizer`), whether or not it skips the
  optimizer's step; `scaler_update`: GradScaler.update (`scale`, the new scale).
- `clip`: gradient clipping: `function`, `scale` (the scale of the scaler whose gradients
  are pending, when `wants_scale()`; else None).
- `dropout`: dropout that is on (`training` true, `p` > 0) inside a top-level model in eval
  mode: `function`, `p`, `model` (name), `eval_site`; `sdpa` the same for
  scaled_dot_product_attention with `dropout_p` > 0. `dropout_eval`, `sdpa_eval`: any such
  call inside a model in eval mode (on or off: the line ran where the invariant could fail).
- `mode`: `model.train(mode)` / `model.eval()` (the outermost call): `training`;
  `mode_call` the same at each line of the user's code that called it (a helper's call).

- `model_input`: a training forward of a top-level model (`tlint/runtime/batches.py`): `name`,
  `nonfinite` (the float inputs holding NaN or infinity), `has_mask`, `accepts_mask`,
  `decoder` (its forward takes decoder inputs), `pad_id`, `padded_rows`, `side`, `rows`;
  `padded_input` when some rows are padded; `forward_end` when that forward returns:
  `causal` (an SDPA call with `is_causal=True` ran in it).
- `loss_input`: a cross-entropy, NLL or binary cross-entropy call in a training step:
  `function`, `form` (probabilities, log-probabilities, logits), `offset` (where its targets
  repeat the last batch's ids), `pad_targets`, `padded_positions`, `eos_ignored`,
  `eos_targets`; `loss_form` when the form was read, `loss_measured` when the offset was.
- `loader_order`: the first training batch of a loader that reads its dataset in order
  (a sequential sampler), at the line that iterated it: `follows` (what the order follows:
  length, label, source), `measured`, `items`, `sampler`.

`observed` keeps, per kind and site, how often it was seen and how many optimizer steps
were done at its first and last time (for pairing with the static findings).

Definite violations are errors, heuristics warnings:

- TL310 (error): an optimizer step with no backward between it and a reset of the
  gradients that an earlier backward (since that optimizer's last step) had produced: the
  step used none of them. (warning): the reset came between two backward passes of the same
  loss line before one step: the first one's gradients were thrown away (an accumulation
  window broken).
- TL305 (error): a scheduler stepped before the first step of its optimizer (a GradScaler
  step, which may skip the optimizer's, counts as one).
- TL303 (error): clipping while the gradients of a backward of a scaled loss are still
  scaled (no unscale_ since) and the scale is not 1.
- TL312 (error): an optimizer step over parameters of a model that ran its forward in eval
  mode since the last step (training in eval mode: dropout off, batch-norm statistics frozen).
- TL214 (error): dropout on (training, p > 0) inside a model in eval mode.
- TL110 (error): NaN or infinity in a training forward's float inputs.
- TL101: padded rows given with no attention mask to a model that accepts one: error for
  padding before the text; for padding after it, a warning when the forward ends without
  having run a causal attention kernel (SDPA's `is_causal`).
- TL314: probabilities given to cross_entropy, probabilities or logits to nll_loss (error);
  inputs all in [0, 1] given to binary_cross_entropy_with_logits (warning).
- TL106 (error): targets on padded positions that are not ignored.
- TL107 (warning): the end-of-text token on real positions, ignored as a target every time.
- TL109: at a step with no next-token loss, targets two ahead of the ids (error: shifted
  twice) or at the same positions (warning: never shifted); not for encoder-decoders.
- TL114 (warning): a training loader reading its dataset in an order that follows the
  samples' length, label or source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# the rules the invariants report (code -> name, as in rules/TLNNN-name.md)
RULES = {
    "TL101": "missing-attention-mask",
    "TL106": "pad-labels-not-ignored",
    "TL107": "eos-masked-as-pad",
    "TL109": "label-shift-mismatch",
    "TL110": "nan-unchecked-input",
    "TL114": "training-loader-not-shuffled",
    "TL214": "dropout-on-in-eval",
    "TL303": "clip-without-unscale",
    "TL305": "scheduler-before-optimizer",
    "TL310": "zero-grad-misplaced",
    "TL312": "missing-eval-mode",
    "TL314": "loss-on-probabilities",
}
# which event kinds bear on each rule (for pairing with the static findings: a rule's path
# ran when one of its kinds was seen at the finding's line)
RULE_EVENTS = {
    "TL101": ("padded_input",),
    "TL106": ("loss_measured",),
    "TL107": ("loss_measured",),
    "TL109": ("loss_measured",),
    "TL110": ("model_input",),
    "TL114": ("loader_order",),
    "TL214": ("dropout_eval", "sdpa_eval"),
    "TL303": ("clip",),
    "TL305": ("scheduler",),
    "TL310": ("zero_grad",),
    "TL312": ("mode", "mode_call"),
    "TL314": ("loss_form",),
}


# TL109: the offset of the targets from the ids at a step with no next-token loss
SHIFTS = {
    2: ("error", "two positions ahead", "the labels were shifted before a loss (or a model) that shifts them "
        "again, so each position learns the token after next"),
    0: ("warning", "at the same positions", "the labels were never shifted, so the model is trained to copy the "
        "token it reads rather than predict the next"),
}


@dataclass(frozen=True, slots=True)
class Site:
    """The innermost frame of the user's code: its file, line and function."""

    path: str
    line: int
    function: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "function": self.function}

    @classmethod
    def from_json(cls, data: Any) -> Site | None:
        if (isinstance(data, dict) and isinstance(data.get("path"), str) and isinstance(data.get("line"), int)
                and isinstance(data.get("function", ""), str)):
            return cls(data["path"], data["line"], data.get("function", ""))
        return None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(slots=True)
class Violation:
    """An invariant that failed, at the user's line."""

    code: str
    severity: str  # "error" | "warning"
    message: str
    site: Site | None
    step: int  # optimizer steps completed when it was seen
    count: int = 1
    related: list[Site] = field(default_factory=list)  # the other lines it involves

    @property
    def name(self) -> str:
        return RULES[self.code]

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "severity": self.severity, "message": self.message,
                "site": self.site.to_json() if self.site else None, "step": self.step, "count": self.count,
                "related": [s.to_json() for s in self.related]}


def _at(site: Site | None) -> str:
    return f"line {site.line}" if site else "an unknown line"


@dataclass(slots=True)
class _Optimizer:
    steps: int = 0                            # steps run (a GradScaler step counts)
    last_step: int = -1                       # the event clock at its last step
    zeroed: tuple[int, Site | None, Site | None] | None = None  # (clock, reset site, backward site)


class Invariants:
    """The state machine over one run's events (one process)."""

    MAX_SITES = 200  # per kind, in `observed`

    def __init__(self) -> None:
        self.clock = 0
        self.steps = 0                                   # optimizer steps completed
        self.violations: list[Violation] = []
        self._seen: dict[tuple[str, Site | None], Violation] = {}
        self._optimizers: dict[int, _Optimizer] = {}
        self._last_backward = -1
        self._last_backward_site: Site | None = None
        self._backward_sites: list[tuple[int, Site | None]] = []  # since the last step of any optimizer
        self._scale_pending = False      # GradScaler.scale ran, no backward of it yet
        self._scaled_grads = False       # a backward of a scaled loss, no unscale_/step since
        self._scaled_site: Site | None = None
        self._decoder = False            # the last top-level model takes decoder inputs
        self._unmasked: tuple[Site | None, str] | None = None  # right padding with no mask, judged at the forward's end
        self._offsets: list[tuple[int, Site | None, str]] = []  # (offset, site, function) since the last step
        # kind -> site -> [count, steps done at its first and at its last time]
        self.observed: dict[str, dict[Site, list[int]]] = {}

    # -- questions the event source asks before computing something costly --

    def wants_scale(self) -> bool:
        """Whether a `clip` event now needs the scaler's scale (gradients still scaled)."""
        return self._scaled_grads

    # -- the events --

    def observe(self, kind: str, site: Site | None, **data: Any) -> list[Violation]:
        self.clock += 1
        if site is not None:
            sites = self.observed.setdefault(kind, {})
            seen = sites.get(site)
            if seen is not None:
                seen[0] += 1
                seen[2] = self.steps
            elif len(sites) < self.MAX_SITES:
                sites[site] = [1, self.steps, self.steps]
        handler = getattr(self, f"_on_{kind}", None)
        return handler(site, **data) if handler is not None else []

    def _opt(self, ident: int) -> _Optimizer:
        return self._optimizers.setdefault(ident, _Optimizer())

    def _report(self, code: str, severity: str, message: str, site: Site | None,
                related: list[Site | None] | None = None) -> list[Violation]:
        key = (code, site)
        if key in self._seen:
            self._seen[key].count += 1
            return []
        violation = Violation(code, severity, message, site, self.steps,
                              related=[s for s in related or [] if s is not None])
        self._seen[key] = violation
        self.violations.append(violation)
        return [violation]

    def _on_backward(self, site: Site | None, **data: Any) -> list[Violation]:
        self._last_backward, self._last_backward_site = self.clock, site
        self._backward_sites.append((self.clock, site))
        del self._backward_sites[:-64]
        if self._scale_pending:
            self._scaled_grads, self._scale_pending, self._scaled_site = True, False, site
        return []

    def _on_zero_grad(self, site: Site | None, *, optimizer: int, had_grads: bool = True,
                      **data: Any) -> list[Violation]:
        opt = self._opt(optimizer)
        if had_grads and self._last_backward > opt.last_step and opt.zeroed is None:
            opt.zeroed = (self.clock, site, self._last_backward_site)
        return []

    def _on_step(self, site: Site | None, *, optimizer: int, empty: bool = False,
                 eval_models: list[dict[str, Any]] | None = None, **data: Any) -> list[Violation]:
        opt = self._opt(optimizer)
        out: list[Violation] = []
        if opt.zeroed is not None:
            when, reset, backward = opt.zeroed
            later = [s for t, s in self._backward_sites if t > when]
            if not later:
                what = "no gradient at all" if empty else "none of them"
                out += self._report(
                    "TL310", "error",
                    f"gradients reset here after the backward at {_at(backward)} and before the optimizer step at "
                    f"{_at(site)}, with no backward between: the step applied {what}", reset, [backward, site])
            elif backward is not None and backward in later:
                out += self._report(
                    "TL310", "warning",
                    f"gradients reset here between two backward passes at {_at(backward)} before one optimizer "
                    f"step (at {_at(site)}): the first pass's gradients were thrown away", reset, [backward, site])
        for model in eval_models or ():
            eval_site = Site.from_json(model.get("eval_site"))
            callers = [Site.from_json(c) for c in model.get("callers", [])]
            name = str(model.get("name", "the model"))
            where = f"in eval mode (switched at {_at(eval_site)})" if eval_site else "in eval mode"
            out += self._report(
                "TL312", "error",
                f"{name} is trained in eval mode: it ran forward {where} and the optimizer step at {_at(site)} "
                f"updates its parameters (dropout off, batch-norm statistics frozen); call model.train() "
                f"before the training steps", eval_site or site, [site, *callers])
        return out

    def _on_stepped(self, site: Site | None, *, optimizer: int, **data: Any) -> list[Violation]:
        out = self._judge_offsets()
        self._stepped(optimizer)
        self.steps += 1
        return out

    def _stepped(self, optimizer: int) -> None:
        opt = self._opt(optimizer)
        opt.steps += 1
        opt.last_step = self.clock
        opt.zeroed = None
        self._backward_sites.clear()
        self._scaled_grads = self._scale_pending = False

    def _on_scheduler(self, site: Site | None, *, optimizer: int, name: str = "the scheduler",
                      metric: bool = False, **data: Any) -> list[Violation]:
        if self._opt(optimizer).steps == 0 and not metric:
            return self._report(
                "TL305", "error",
                f"{name}.step() ran before the first step of its optimizer: the first learning rate of the "
                f"schedule is skipped (step the optimizer first, then the scheduler)", site)
        return []

    def _on_scale(self, site: Site | None, **data: Any) -> list[Violation]:
        self._scale_pending = True
        return []

    def _on_unscale(self, site: Site | None, **data: Any) -> list[Violation]:
        self._scaled_grads = self._scale_pending = False
        return []

    def _on_scaler_step(self, site: Site | None, *, optimizer: int, **data: Any) -> list[Violation]:
        self._stepped(optimizer)  # (the optimizer's own step, if it runs, comes first)
        return []

    def _on_clip(self, site: Site | None, *, function: str = "clip_grad_norm_", scale: float | None = None,
                 **data: Any) -> list[Violation]:
        if self._scaled_grads and scale is not None and scale != 1.0:
            return self._report(
                "TL303", "error",
                f"{function} clips gradients still multiplied by the GradScaler's scale ({scale:g}) of the "
                f"backward at {_at(self._scaled_site)}: the threshold is compared with scaled norms; call "
                f"scaler.unscale_(optimizer) before clipping", site, [self._scaled_site])
        return []

    def _on_dropout(self, site: Site | None, *, function: str = "dropout", p: float = 0.0, model: str = "the model",
                    eval_site: Any = None, **data: Any) -> list[Violation]:
        switched = Site.from_json(eval_site)
        where = f" (switched at {_at(switched)})" if switched else ""
        return self._report(
            "TL214", "error",
            f"{function} with p={p:g} is active while {model} is in eval mode{where}: evaluation is random; "
            f"pass training=self.training (or zero the probability outside training)", site, [switched])

    def _on_sdpa(self, site: Site | None, *, p: float = 0.0, model: str = "the model", eval_site: Any = None,
                 **data: Any) -> list[Violation]:
        switched = Site.from_json(eval_site)
        where = f" (switched at {_at(switched)})" if switched else ""
        return self._report(
            "TL214", "error",
            f"scaled_dot_product_attention with dropout_p={p:g} while {model} is in eval mode{where}: the kernel "
            f"has no training flag; pass dropout_p=self.p if self.training else 0.0", site, [switched])

    # -- the batches and the loss --

    def _on_model_input(self, site: Site | None, *, name: str = "the model", nonfinite: list[str] | None = None,
                        has_mask: bool = True, accepts_mask: bool = False, decoder: bool = False,
                        pad_id: int | None = None, padded_rows: int = 0, side: str | None = None, rows: int = 0,
                        **data: Any) -> list[Violation]:
        self._decoder = decoder
        out: list[Violation] = []
        if nonfinite:
            out += self._report(
                "TL110", "error",
                f"{name}'s forward got NaN or infinite values in {', '.join(nonfinite[:4])} at step "
                f"{self.steps + 1}: the batch came out of the data pipeline that way, and this step's loss and "
                f"gradients are not finite", site)
        self._unmasked = None
        if padded_rows and not has_mask and accepts_mask:
            if side == "left":
                out += self._report(
                    "TL101", "error",
                    f"{padded_rows} of {rows} rows of the input ids are padded (id {pad_id} before the text) and "
                    f"{name} got no attention_mask: every real token attends to the padding; pass the tokenizer's "
                    f"attention_mask", site)
            else:  # (judged when the forward ends: a causal model's real tokens never see trailing padding)
                self._unmasked = (site, f"{padded_rows} of {rows} rows of the input ids are padded (id {pad_id} "
                                  f"after the text) and {name} got no attention_mask, and its forward ran no causal "
                                  f"attention kernel: unless the model masks causally by itself, the real tokens "
                                  f"attend to the padding; pass the tokenizer's attention_mask")
        return out

    def _on_forward_end(self, site: Site | None, *, causal: bool = False, **data: Any) -> list[Violation]:
        unmasked, self._unmasked = self._unmasked, None
        if unmasked is None or causal:
            return []
        return self._report("TL101", "warning", unmasked[1], unmasked[0])

    def _on_loss_input(self, site: Site | None, *, function: str = "cross_entropy", form: str | None = None,
                       offset: int | None = None, pad_targets: int = 0, padded_positions: int = 0,
                       eos_ignored: int = 0, eos_targets: int = 0, **data: Any) -> list[Violation]:
        out: list[Violation] = []
        wrong = {
            ("cross_entropy", "probabilities"): "its input rows already sum to 1 (probabilities): cross_entropy "
            "applies log_softmax itself, so the softmax before it flattens the loss and its gradients; pass the logits",
            ("nll_loss", "probabilities"): "its input rows are probabilities (they sum to 1), not log-probabilities: "
            "apply log_softmax instead of softmax",
            ("nll_loss", "logits"): "its input rows are raw scores, not log-probabilities (their logsumexp is not "
            "0): apply log_softmax first, or use cross_entropy",
        }.get((function, form or ""))
        if wrong:
            out += self._report("TL314", "error", f"F.{function}: {wrong}", site)
        elif function == "binary_cross_entropy_with_logits" and form == "probabilities":
            out += self._report(
                "TL314", "warning",
                f"F.{function} got inputs that all lie in [0, 1], as a sigmoid's output does: the function applies "
                f"the sigmoid itself; pass the logits (or use binary_cross_entropy)", site)
        if offset is None or self._decoder:
            return out
        self._offsets.append((offset, site, function))
        if pad_targets:
            out += self._report(
                "TL106", "error",
                f"{pad_targets} targets of {function} lie on padded positions (attention mask 0) and are not its "
                f"ignore_index: the loss trains the model to predict padding; set the labels of padding to -100",
                site)
        if eos_ignored and not eos_targets:
            out += self._report(
                "TL107", "warning",
                f"the end-of-text token is in the text {eos_ignored} times in this batch, but {function} ignores it "
                f"as a target every time (it was masked like padding): the model never learns to end its output",
                site)
        return out

    def _judge_offsets(self) -> list[Violation]:
        """At a step: the loss targets of the step against the ids (a step with a next-token loss
        may have losses at other offsets too: heads that predict further ahead)."""
        offsets, self._offsets = self._offsets, []
        if not offsets or any(k == 1 for k, _, _ in offsets):
            return []
        out: list[Violation] = []
        for k, site, function in offsets:
            if k in SHIFTS:
                severity, where, what = SHIFTS[k]
                out += self._report("TL109", severity, f"the targets of {function} are the input ids {where}: {what}",
                                    site)
        return out

    def _on_loader_order(self, site: Site | None, *, follows: list[str] | None = None, sampler: str = "",
                         **data: Any) -> list[Violation]:
        if not follows:
            return []
        return self._report(
            "TL114", "warning",
            f"the training loader iterated here reads its dataset in order ({sampler}), and that order follows "
            f"the samples' {'; '.join(follows)}: batches are not a random draw; pass shuffle=True", site)
