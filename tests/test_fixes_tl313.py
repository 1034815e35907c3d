"""TL313's fix: remove the anomaly-detection switch (the statement, or the `with` around a
block, dedenting the block)."""

from __future__ import annotations

from tests.fixutil import assert_fix, findings, source

CODE = "TL313"


def offered(tmp_path, text: str) -> list:
    """The fixes of the TL313 findings of `text` (None where no fix is offered)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "m.py").write_text(source(text), encoding="utf-8")
    found = [d for d in findings(root, [CODE]) if d.code == CODE]
    assert found, "TL313 reports nothing"
    return [d.fix for d in found]


def test_module_level_switch_is_deleted(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch

    # find the NaN
    torch.autograd.set_detect_anomaly(True)
    model = torch.nn.Linear(2, 2)
""", """\
    import torch

    # find the NaN
    model = torch.nn.Linear(2, 2)
""")


def test_switch_through_an_alias_with_a_true_default(tmp_path):
    assert_fix(tmp_path, CODE, """\
    from torch import autograd as ag


    def setup(model, detect_anomaly=True):
        ag.set_detect_anomaly(detect_anomaly)  # while debugging
        return model.train()
""", """\
    from torch import autograd as ag


    def setup(model, detect_anomaly=True):
        return model.train()
""")


def test_alone_in_its_block_becomes_pass(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch


    def setup():
        torch.autograd.set_detect_anomaly(mode=True)  # slow
""", """\
    import torch


    def setup():
        pass  # slow
""")


def test_with_block_is_unwrapped_and_dedented(tmp_path):
    assert_fix(tmp_path, CODE, '''\
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2")


    def train(loader, optimizer):
        with torch.autograd.detect_anomaly():
            # one pass over the data
            for batch in loader:
                loss = model(**batch).loss
                note = """a
      b"""
                loss.backward(
                    retain_graph=False)  # keep
                optimizer.step()
            optimizer.zero_grad()
        return loss
''', '''\
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2")


    def train(loader, optimizer):
        # one pass over the data
        for batch in loader:
            loss = model(**batch).loss
            note = """a
      b"""
            loss.backward(
                retain_graph=False)  # keep
            optimizer.step()
        optimizer.zero_grad()
        return loss
''')


def test_with_block_at_module_level(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch

    with torch.autograd.detect_anomaly(check_nan=True):
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
    print(x.grad)
""", """\
    import torch

    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    print(x.grad)
""")


def test_with_as_a_context_manager_of_set_detect_anomaly(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch


    def step(model, batch):
        with torch.autograd.set_detect_anomaly(True):
            model(**batch).loss.backward()
""", """\
    import torch


    def step(model, batch):
        model(**batch).loss.backward()
""")


def test_no_fix_when_it_cannot_be_exact(tmp_path):
    fixes = offered(tmp_path, """\
    import torch

    torch.autograd.set_detect_anomaly(True); x = 1
    mode = torch.autograd.set_detect_anomaly(True)
    with torch.autograd.detect_anomaly(), torch.no_grad():
        pass
    with torch.autograd.detect_anomaly() as anomaly:
        pass
    with torch.autograd.detect_anomaly():  # debugging
        pass
    torch.autograd.detect_anomaly(check_nan=True).__enter__()


    def setup(): torch.autograd.set_detect_anomaly(True)
""")
    assert len(fixes) == 7 and fixes == [None] * 7
