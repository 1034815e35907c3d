"""TL316 grad-norm-not-monitored: precision guards beyond the rule document."""

from __future__ import annotations

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
