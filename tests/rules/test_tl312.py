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


def test_no_grad_inside_the_loop_body(tmp_path):
    check(tmp_path, {"run.py": """
        import torch
        import torch.nn.functional as F


        def check_model(model, holdout):
            correct = 0
            for x, y in holdout:  # expect: TL312
                with torch.no_grad():
                    pred = model(x).argmax(-1)
                correct += (pred == y).sum().item()
            return correct


        def train_some(model, loader, optimizer):
            for x, y in loader:
                with torch.no_grad():
                    target = model(x).detach()
                loss = F.mse_loss(model(x), target)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


@pytest.mark.parametrize("switch", ["", "model.eval()"])
def test_generation_loop_of_an_evaluation(tmp_path, switch):
    marker = "" if switch else "  # expect: TL312"
    check(tmp_path, {"run.py": f"""
        import torch


        def evaluate_bleu(model, tokenizer, loader, metric):
            {switch}
            predictions = []
            with torch.no_grad():
                for batch in loader:{marker}
                    out = model.generate(batch["input_ids"], max_new_tokens=32)
                    predictions.extend(tokenizer.batch_decode(out))
            return metric.compute(predictions=predictions)
    """})


def test_loss_estimation_fetching_batches(tmp_path):
    check(tmp_path, {"run.py": """
        import torch


        @torch.no_grad()
        def estimate_loss(model, get_batch, iters=100):
            losses = torch.zeros(iters)
            for k in range(iters):  # expect: TL312
                X, Y = get_batch("val")
                _, loss = model(X, Y)
                losses[k] = loss.item()
            return losses.mean()
    """})


def test_inline_evaluation_in_main_and_at_top_level(tmp_path):
    check(tmp_path, {"main.py": """
        import torch
        import torch.nn.functional as F


        def main(model, train_loader, val_loader, optimizer, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
                    optimizer.zero_grad()
                val_loss = 0.0
                with torch.no_grad():
                    for x, y in val_loader:  # expect: TL312
                        val_loss += F.cross_entropy(model(x), y).item()
                print(epoch, val_loss)
    """, "score.py": """
        import torch
        import torch.nn.functional as F

        from models import build

        model, val_loader = build()
        total = 0.0
        with torch.no_grad():
            for x, y in val_loader:  # expect: TL312
                total += F.cross_entropy(model(x), y).item()
        print(total)
    """})


def test_rollout_feeding_the_update_is_not_evaluation(tmp_path):
    check(tmp_path, {"ppo.py": """
        import torch


        def ppo_step(policy, queries, optimizer, batch_size):
            old_logprobs, scores = [], []
            with torch.no_grad():
                for i in range(0, len(queries), batch_size):
                    batch = queries[i:i + batch_size]
                    out = policy.model(batch)
                    old_logprobs.append(out.logprobs)
                    scores.append(out.reward)
            old = torch.cat(old_logprobs)
            for i in range(0, len(queries), batch_size):
                new = policy.model(queries[i:i + batch_size])
                loss = -((new.logprobs - old[i:i + batch_size]).exp() * torch.cat(scores)[i:i + batch_size]).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("use", "flagged"), [("old[i]", False), ("0.0", True)])
def test_forward_pass_helper_whose_results_feed_the_update(tmp_path, use, flagged):
    marker = "  # expect: TL312" if flagged else ""
    check(tmp_path, {"ppo.py": f"""
        import torch


        class Trainer:
            def forward_pass(self, batches):
                all_logprobs = []
                for i in range(len(batches)):{marker}
                    with torch.no_grad():
                        out = self.model(batches[i])
                    start = 0
                    start += len(batches[i]) - 1
                    all_logprobs.append(out.logprobs[start:])
                return all_logprobs

            def step(self, batches):
                old = self.forward_pass(batches)
                for i in range(len(batches)):
                    new = self.model(batches[i])
                    loss = (new.logprobs - {use}).exp().mean()
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()
    """})


@pytest.mark.parametrize("use", ['print(step, losses["val"])', 'best = min(best, losses["val"])',
                                 'scheduler.step(losses["val"])', 'log = {"val": losses["val"], "lr": lr}'])
def test_loss_estimate_read_only_for_logging_is_evaluation(tmp_path, use):
    # the helper's results are read by the training loop, but never reach its loss
    check(tmp_path, {"train.py": f"""
        import torch


        @torch.no_grad()
        def estimate_loss(model, get_batch, iters):
            out = {{}}
            for split in ("train", "val"):  # expect: TL312
                losses = torch.zeros(iters)
                for k in range(iters):
                    x, y = get_batch(split)
                    losses[k] = model(x, y).loss.item()
                out[split] = losses.mean()
            model.train()
            return out


        def train(model, get_batch, optimizer, scheduler, steps, lr, best):
            for step in range(steps):
                if step % 100 == 0:
                    losses = estimate_loss(model, get_batch, 20)
                    {use}
                x, y = get_batch("train")
                loss = model(x, y).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_results_reaching_the_loss_through_assignments_are_a_rollout(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        @torch.no_grad()
        def score_batches(model, batches):
            scores = []
            for batch in batches:
                scores.append(model(batch).logits.softmax(-1))
            return scores


        def distil(student, teacher, batches, optimizer):
            targets = score_batches(teacher, batches)
            soft = [t.detach() for t in targets]
            for i, batch in enumerate(batches):
                logp = student(batch).logits.log_softmax(-1)
                kl = torch.nn.functional.kl_div(logp, soft[i], reduction="batchmean")
                loss = kl
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("train_binds", "flagged"), [
    ("outputs = model(**batch)\n                    loss = outputs.loss", True),  # the update's own `outputs`
    ("loss = model(**batch).loss + 0.1 * outputs.logits.mean()", False),  # reads the eval's `outputs`
])
def test_names_the_training_loop_binds_itself_are_not_fed_by_the_evaluation(tmp_path, train_binds, flagged):
    marker = "  # expect: TL312" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch


        def run(model, optimizer, train_loader, eval_loader, metric, epochs):
            for epoch in range(epochs):
                for batch in eval_loader:{marker}
                    with torch.no_grad():
                        outputs = model(**batch)
                    metric.add_batch(predictions=outputs.logits.argmax(-1), references=batch["labels"])
                model.train()
                for batch in train_loader:
                    {train_binds}
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
    """})


PERIODIC = """
    import torch.nn.functional as F


    def train(model, optimizer, train_batches, val_batches, steps):
        for step in range(steps):
            model.train()
            x, y = next(train_batches)
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            if (step + 1) % 100 == 0:
                SWITCH
                for name, batches in val_batches.items():MARK
                    x, y = next(batches)
                    incorrect = (model(x).argmax(-1) != y).sum().item()
                    print(name, incorrect)
"""


@pytest.mark.parametrize(("switch", "flagged"), [("pass", True), ("model.eval()", False)])
def test_periodic_validation_inside_the_training_loop(tmp_path, switch, flagged):
    source = PERIODIC.replace("SWITCH", switch).replace("MARK", "  # expect: TL312" if flagged else "")
    check(tmp_path, {"train.py": source})


def test_a_loop_inside_the_training_loop_not_under_an_if_is_not_periodic_validation(tmp_path):
    source = PERIODIC.replace("            if (step + 1) % 100 == 0:\n                SWITCH\n", "").replace(
        "MARK", "").replace("\n                ", "\n            ")
    assert "if (step" not in source
    check(tmp_path, {"train.py": source})
