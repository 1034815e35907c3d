"""eval-determinism: the model in evaluation mode must give the same outputs for the same
batch, whatever the random state (TL214: functional dropout that `model.eval()` does not
turn off, SDPA's `dropout_p` given in every mode). Its positive control (in
`tlint.verify.controls`) injects attention dropout that stays on and checks the probe sees it."""

from __future__ import annotations

import torch

from tlint.verify.probes import PROBE_CLASSES, ModuleTrace, Probe, ProbeContext, ProbeResult, relative_change


class EvalDeterminismProbe(Probe):
    """One padded batch through the model in eval mode twice, under two different random
    seeds: the outputs at real positions must be identical (up to float noise). On a
    difference, the first module whose output differs between the two runs is named."""

    name = "eval-determinism"
    tolerance = 1e-5
    unit = "max abs difference between two eval-mode forwards of one batch / output RMS"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        model = ctx.model
        was_training = model.training
        model.eval()
        try:
            ids, keep = ctx.padded_batch(ctx.generator(31))
            mask = keep if ctx.caller.has_mask else None
            runs = [self.traced(ctx, ids, mask, ctx.seed * 7919 + salt) for salt in (1, 2)]
        finally:
            model.train(was_training)
        (first, first_calls), (second, second_calls) = runs
        if first.shape != second.shape:
            return self.result("fail", float("inf"), None, f"the output's shape changed between two eval-mode "
                               f"forwards: {tuple(first.shape)} and {tuple(second.shape)}")
        where = ctx.selection(first, ids, keep)
        figure = relative_change(first, second, where)
        if figure <= self.tolerance:
            return self.result("pass", figure, detail="two eval-mode forwards of one batch under different random "
                               "seeds agree")
        module = None
        for (name, a), (_, b) in zip(first_calls, second_calls, strict=False):
            if a.shape == b.shape and a.numel() and relative_change(a, b, torch.ones_like(a, dtype=torch.bool)) \
                    > self.tolerance:
                module = name
                break
        where_text = f"; the first module whose output differs is `{module}`" if module else ""
        return self.result("fail", figure, module, "two eval-mode forwards of one batch differ: something random "
                           f"(dropout) stays on under model.eval(){where_text}")

    @staticmethod
    def traced(ctx: ProbeContext, ids: torch.Tensor, mask: torch.Tensor | None, seed: int):
        calls: list[tuple[str, torch.Tensor]] = []
        torch.manual_seed(seed)
        with ModuleTrace(ctx.model, lambda name, t: calls.append((name, t.float().cpu()))):
            out = ctx.raw_forward(ids, mask)  # not `forward`, which fixes the seed
        return out, calls


PROBE_CLASSES[EvalDeterminismProbe.name] = EvalDeterminismProbe
