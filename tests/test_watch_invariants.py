"""tlint.watch checks the training-step invariants that `tlint trace` checks, through the same
module (`tlint.runtime`): a violation is a finding at the user's line, a stop action stops
at the user's next call, a healthy loop gives none, `invariants=False` turns them off, and a
watch inside a traced process shares the trace's hooks instead of installing its own."""

from __future__ import annotations

import gc

import pytest

from tests.torchutil import import_torch

# slow: trains small models with the watch attached
pytestmark = pytest.mark.slow

torch = import_torch()

from tlint.runtime import hooks  # noqa: E402
from tlint.runtime.invariants import Invariants  # noqa: E402
from tlint.watch import TrainingStopped, Watch  # noqa: E402

F = torch.nn.functional


def loop(watch_options: dict, *, bug: bool, steps: int = 3) -> tuple[Watch, int]:
    """A plain loop; with `bug`, `model.zero_grad()` between the backward and the step.
    Returns the watch and the line of the reset."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    w = Watch(model, optimizer, output_dir=None, print_summary=False, **watch_options)
    reset_line = 0
    for _ in range(steps):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        if not bug:
            model.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        w.after_backward(loss)
        if bug:
            reset_line = _line() + 1
            model.zero_grad()
        optimizer.step()
        w.after_step()
    w.close()
    return w, reset_line


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def no_hooks_left():
    gc.collect()
    assert hooks.Tracer.active is None
    yield
    gc.collect()
    assert hooks.Tracer.active is None  # every watch released them


def test_a_reset_between_backward_and_step_is_an_error_at_the_users_line():
    w, line = loop({}, bug=True)
    (finding,) = w.problems
    assert (finding.kind, finding.rule, finding.severity, finding.step) == ("zero-grad-misplaced", "TL310", "error", 1)
    assert finding.data == {"path": __file__, "line": line}
    assert f"{__file__}:{line}: gradients reset here" in finding.message
    assert finding.count == 3  # seen at every step, reported once


def test_a_healthy_loop_gives_no_invariant_finding():
    w, _ = loop({}, bug=False)
    assert w.findings == [] or all(f.severity == "info" for f in w.findings)


def test_invariants_off():
    w, _ = loop({"invariants": False}, bug=True)
    assert w.problems == []


def test_the_stop_action_raises_at_the_users_next_call():
    with pytest.raises(TrainingStopped) as stopped:
        loop({"on_problem": "stop"}, bug=True)
    assert stopped.value.finding.kind == "zero-grad-misplaced" and stopped.value.finding.step == 1
    gc.collect()  # the stopped watch was never closed: collecting it releases the hooks


def test_a_watch_inside_a_traced_process_shares_the_trace_hooks():
    seen = []
    tracer = hooks.Tracer(Invariants(), seen.append)
    tracer.install()
    try:
        w, _ = loop({}, bug=True)
        assert hooks.Tracer.active is tracer and tracer.listeners == [seen.append]
    finally:
        tracer.uninstall()
    assert [v.code for v in seen] == ["TL310"]
    assert [f.rule for f in w.problems] == ["TL310"]


def test_labels_on_padding_are_a_watch_finding_at_the_model_s_line():
    """The batch and loss invariants reach the watch too: a GPT-2 given its padded ids as
    labels (the padding is not -100) is `pad-labels-not-ignored` at the model's call."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50,
                                                                 n_positions=32, pad_token_id=0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w = Watch(model, optimizer, output_dir=None, print_summary=False, measure=False)
    ids = torch.randint(3, 50, (4, 12))
    mask = torch.ones_like(ids)
    for row, length in enumerate([12, 10, 8, 6]):
        ids[row, length:], mask[row, length:] = 0, 0
    for _ in range(2):
        call_line = _line() + 1
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        w.after_backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        w.after_step()
    w.close()
    found = [(f.kind, f.severity, f.data.get("line")) for f in w.findings if f.severity != "info"]
    assert found == [("pad-labels-not-ignored", "error", call_line)]
