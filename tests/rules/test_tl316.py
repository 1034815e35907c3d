"""TL316 grad-norm-not-monitored: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL316"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_norm_helper_of_the_same_file(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def total_grad_norm(model):
            return torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                print(total_grad_norm(model))
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_deepspeed_engine(tmp_path):
    check(tmp_path, {"train.py": """
        import deepspeed


        def train(model, loader, config):
            engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
            for batch in loader:
                engine.backward(engine(**batch).loss)
                engine.step()
    """})


def test_test_files_are_not_judged(tmp_path):
    check(tmp_path, {"tests/test_loop.py": """
        def test_loop(model, batches, optimizer):
            for batch in batches:
                model(batch).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_off_by_default():
    from tlint.rules import BY_CODE

    assert BY_CODE[CODE].default_enabled is False


# --- issue 20: one finding per loop with TL301; benchmark loops -------------------------


def _loop(header: str, marker: str) -> str:
    return f"""
        import torch
        {header}


        def train(model, loader):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step(){marker}
                optimizer.zero_grad()
    """


def test_loop_without_clipping_in_a_transformer_project_is_tl301s(tmp_path):
    files = {"train.py": _loop("from transformers import AutoModel", "  # expect: TL301")}
    assert lint(tmp_path, files, [CODE, "TL301"]) == expected(files, "TL301")


def test_loop_without_clipping_elsewhere_asks_for_the_norm(tmp_path):
    files = {"train.py": _loop("import math", "  # expect: TL316")}
    assert lint(tmp_path, files, [CODE, "TL301"]) == expected(files, CODE)


def test_benchmark_and_profiled_loops(tmp_path):
    check(tmp_path, {"bench_throughput.py": """
        import torch


        def run(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
    """, "train.py": """
        import torch


        def run(model, loader, optimizer):
            with torch.profiler.profile():
                for batch in loader:
                    model(**batch).loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
            for batch in loader:
                model(**batch).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TL316
                optimizer.step()
    """})


@pytest.mark.parametrize(("script_model", "flagged"), [
    ("from model import GPT\nmodel = GPT()", False),  # TL301's finding: its program trains a transformer
    ("from torchvision.models import resnet18\nmodel = resnet18()", True),
])
def test_a_generic_trainer_that_does_not_clip_is_tl301s_where_its_program_trains_a_transformer(
        tmp_path, script_model, flagged):
    marker = "  # expect: TL316" if flagged else ""
    files = {
        "trainer.py": f"""
            def run(model, optimizer, loader):
                for x, y in loader:
                    loss = model(x, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step(){marker}
        """,
        "model.py": """
            from torch import nn


            class GPT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, batch_first=True), 2)
        """,
        "run.py": script_model + "\nfrom trainer import run\nrun(model, opt, loader)\n",
    }
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
