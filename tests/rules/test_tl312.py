"""TL312 missing-eval-mode: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL312"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_eval_after_the_call_does_not_count(tmp_path):
    check(tmp_path, {"run.py": """
        import torch


        @torch.no_grad()
        def accuracy(model, loader):
            hits = 0
            for x, y in loader:  # expect: TL312
                hits += (model(x).argmax(-1) == y).sum().item()
            return hits


        def main(model, loader):
            print(accuracy(model, loader))
            model.eval()
    """})


def test_eval_before_the_call_in_the_caller(tmp_path):
    check(tmp_path, {"run.py": """
        import torch


        @torch.no_grad()
        def accuracy(model, loader):
            hits = 0
            for x, y in loader:
                hits += (model(x).argmax(-1) == y).sum().item()
            return hits


        def main(model, loader):
            model.train(False)
            print(accuracy(model, loader))
    """})


def test_epoch_loop_without_train_again(tmp_path):
    check(tmp_path, {"train.py": """
        def evaluate(model, loader):
            model.eval()
            return [model(**b).loss.item() for b in loader]


        def train(model, loader, val_loader, optimizer, epochs):
            model.train()
            for epoch in range(epochs):
                for batch in loader:
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                evaluate(model, val_loader)  # expect: TL312
    """})


def test_update_and_ema_functions(tmp_path):
    check(tmp_path, {"ema.py": """
        import torch


        @torch.no_grad()
        def update_ema(ema, model, batches, decay=0.999):
            for batch in batches:
                loss = model(batch)
                ema.mul_(decay).add_(loss)
    """})


def test_test_files_are_not_judged(tmp_path):
    check(tmp_path, {"tests/test_eval.py": """
        import torch


        @torch.no_grad()
        def evaluate(model, loader):
            return [model(**b).loss for b in loader]
    """})


# --- issue 20: loaders of any name, metrics kept as running totals ---------------------


@pytest.mark.parametrize(("update", "flagged"), [("tot += dice(pred, mask).item()", True),
                                                 ("tot += 1", False)])
def test_running_total_over_a_loader_of_any_name(tmp_path, update, flagged):
    marker = "  # expect: TL312" if flagged else ""
    check(tmp_path, {"evaluate.py": f"""
        import torch


        def eval_net(net, pairs, dice):
            tot = 0
            for img, mask in pairs:{marker}
                pred = (torch.sigmoid(net(img)) > 0.5).float()
                {update}
            return tot
    """})


def test_loop_not_feeding_the_model_is_not_evaluation(tmp_path):
    check(tmp_path, {"evaluate.py": """
        import torch


        @torch.no_grad()
        def eval_sampler(model, prompt, steps):
            total = 0.0
            for _ in range(steps):
                out = model(prompt)
                total += out.mean()
            return total
    """})
