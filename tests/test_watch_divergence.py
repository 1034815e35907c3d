"""The watch's absolute checks from step 1, with the callbacks' defaults: three model
families (GPT-2, Llama, BERT, each built from a config: nothing downloaded) trained with
the Hugging Face Trainer, Lightning and a plain loop at learning rates 10³× to 10⁵× the
usual 1e-3 for AdamW: every such run diverges within a few steps, and each gives an error
within 5 steps. Silence on a fine-tune that starts from a low loss, on a warmup transient,
and on a regression trained with a mean squared error; the per-step loss test alone
(`measure=False`) still finds the divergence."""

from __future__ import annotations

import math

import pytest

from tests.torchutil import import_torch

# slow: about 40 short training runs through the Hugging Face Trainer, Lightning and plain loops
pytestmark = pytest.mark.slow

torch = import_torch()

from tests.watchutil import V, batches, gpt2, one_thread  # noqa: E402,F401
from tlint.watch import Watch  # noqa: E402
from tlint.watch import findings as F  # noqa: E402

STEPS = 5
DIVERGING = (1.0, 100.0)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16,
                                        pad_token_id=0))


def bert():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, max_position_embeddings=16, pad_token_id=0))


FAMILIES = {"gpt2": gpt2, "llama": llama, "bert": bert}


def errors_within(watch: Watch, steps: int = STEPS) -> list[F.Finding]:
    return [f for f in watch.findings if f.severity == "error" and f.step is not None and f.step <= steps]


def plain(make, lr, data, **options):
    model = make()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    w = Watch(model, optimizer, output_dir=None, print_summary=False, **options)
    losses = []
    for b in data:
        out = model(**b)
        out.loss.backward()
        w.after_backward(out.loss)
        optimizer.step()
        optimizer.zero_grad()
        w.after_step()
        losses.append(out.loss.item())
    w.close()
    return w, losses


@pytest.mark.parametrize("lr", [1.0, 10.0, 100.0])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_plain_loop_diverging_is_an_error_within_5_steps(family, lr):
    w, losses = plain(FAMILIES[family], lr, batches(STEPS))
    assert max(losses[1:]) > 2.5 * losses[0]  # (it does diverge)
    assert errors_within(w), [str(f) for f in w.findings]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_per_step_loss_test_alone_finds_it(family):
    """No sampled step (`measure=False`): the loss read every step of the first ones."""
    w, _ = plain(FAMILIES[family], 100.0, batches(STEPS), measure=False)
    (found,) = errors_within(w)
    assert found.kind == "loss-divergence" and found.rule == "TL307" and found.data["since"] == 2
    assert f"ln V = {F.fmt(F.DIVERGE_CHANCE * math.log(V))} for V = {V} classes" in found.message


@pytest.mark.parametrize("lr", DIVERGING)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hf_trainer_diverging_is_an_error_within_5_steps(tmp_path, family, lr):
    from transformers import Trainer, TrainingArguments, default_data_collator

    from tlint.watch import HFCallback

    data = [{k: v[i] for k, v in b.items()} for b in batches(STEPS) for i in range(8)]
    args = TrainingArguments(str(tmp_path), max_steps=STEPS, per_device_train_batch_size=8, learning_rate=lr,
                             lr_scheduler_type="constant", report_to=[], use_cpu=True, save_strategy="no",
                             disable_tqdm=True, dataloader_num_workers=0, seed=0, logging_steps=STEPS)
    callback = HFCallback(print_summary=False)
    Trainer(model=FAMILIES[family](), args=args, train_dataset=data, data_collator=default_data_collator,
            callbacks=[callback]).train()
    assert callback.watch is not None and errors_within(callback.watch), [str(f) for f in callback.watch.findings]


@pytest.mark.parametrize("lr", DIVERGING)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_lightning_diverging_is_an_error_within_5_steps(tmp_path, family, lr):
    import lightning as L

    from tlint.watch import LightningCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = FAMILIES[family]()

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=lr)

    callback = LightningCallback(print_summary=False)
    trainer = L.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, callbacks=[callback],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(tmp_path))
    trainer.fit(Module(), torch.utils.data.DataLoader(batches(STEPS), batch_size=None))
    assert callback.watch is not None and errors_within(callback.watch), [str(f) for f in callback.watch.findings]


def test_a_fine_tune_from_a_low_loss_is_quiet():
    """Pre-trained on the task until its loss is low, then fine-tuned on fresh rows of it at a
    usual fine-tuning rate, and at a rate 10× that: a small start is judged against chance."""
    model = gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for b in batches(40, seed=1):
        model(**b).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    for lr in (1e-4, 1e-3):
        tuned = gpt2()
        tuned.load_state_dict(model.state_dict())
        w, losses = plain(lambda m=tuned: m, lr, batches(20, seed=2))
        assert losses[0] < 0.5 * math.log(V)
        assert w.problems == [], [str(f) for f in w.problems]


def test_a_warmup_transient_is_quiet():
    """A linear warmup to a high but workable rate: the loss rises for a few steps, then falls."""
    model = gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    w = Watch(model, optimizer, output_dir=None, print_summary=False)
    for b in batches(30):
        out = model(**b)
        out.loss.backward()
        w.after_backward(out.loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        w.after_step()
    w.close()
    assert w.problems == [], [str(f) for f in w.problems]


def regression(lr: float):
    """A small transformer encoder regressing a real value per sequence, mean squared error."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.TransformerEncoder(layer, 2),
                                torch.nn.Flatten(), torch.nn.Linear(16 * 8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    w = Watch(model, optimizer, output_dir=None, print_summary=False)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(25):
        x = torch.randn(16, 8, 4, generator=gen)
        y = x.sum(dim=(1, 2), keepdim=False)[:, None] / 4
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        w.after_backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        w.after_step()
        losses.append(loss.item())
    w.close()
    return w, losses


def test_a_mean_squared_error_regression_is_quiet_and_its_divergence_is_not():
    w, losses = regression(1e-3)
    assert losses[-1] < losses[0] and w.problems == [], [str(f) for f in w.problems]
    w, losses = regression(100.0)
    assert errors_within(w), [str(f) for f in w.findings]


@pytest.mark.parametrize(("first", "classes", "losses", "expected"), [
    (4.6, 100, [12.0, 13.0, 14.0], 4),            # 2 × ln 100 = 9.2 < 46: three in a row above it
    (4.6, 100, [12.0, 3.0, 14.0, 15.0], None),    # a run broken by one healthy step
    (0.2, 100, [1.5, 2.5, 3.0, 2.0], None),        # a fine-tune judged against chance (ln 100 = 4.6), not 10 × 0.2
    (0.2, 100, [5.0, 6.0, 7.0], 4),                 # ... above chance three times: diverging
    (0.5, None, [6.0, 7.0, 8.0], 4),                # no classes known: 10 × the first loss
    (-1.0, None, [5.0, 6.0, 7.0], None),            # a loss that can be negative has no factor bound
    (4.6, 100, [float("nan"), 12.0, 13.0], None),   # non-finite: another finding's business
])
def test_the_divergence_bounds(first, classes, losses, expected):
    test = F.DivergenceTest(classes)
    assert test.see(1, first) is None
    found = [test.see(step, loss) for step, loss in enumerate(losses, 2)]
    hits = [step for step, hit in enumerate(found, 2) if hit is not None]
    assert hits == ([] if expected is None else [expected])
