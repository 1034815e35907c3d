"""The data A/B probe (`verify --probe data-ab`) on a tiny GPT-2 built from a transformers
config: a loader with NaN rows and a mask that covers the pad tokens (labels on padding too)
is at fault, the cleaned run recovers and the finding names the data scan's checks; a clean
loader gives no finding; batches or a model output it cannot understand skip with the
reason; the figures are the same on a second run; the wiring (`--probe data-ab`, the loaders
sent to the child, the JSON fields `curves`, `data_checks`, `ab`)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.torchutil import import_torch, torch_required

# slow: trains small models on good and broken data (the data-ab probe)
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_data_ab")]

torch = import_torch()
if torch_required():  # the dev extra installs transformers
    import transformers
else:
    transformers = pytest.importorskip("transformers")

from tlint.verify.data_ab import DataABProbe, Facts, _repad, recompute_keep
from tlint.verify.loading import Caller
from tlint.verify.options import select_probes
from tlint.verify.output import report_json
from tlint.verify.probes import ProbeContext
from tlint.verify.training_probes import TrainingSettings

VOCAB = 64

LOADERS = '''
import torch
from torch.utils.data import DataLoader

PAD, EOS, VOCAB = 0, 1, 64


def sequences(n, seed):
    """Arithmetic progressions of token ids (learnable in a few steps), 3 to 14 tokens and EOS."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        k = int(torch.randint(4, 15, (1,), generator=g))
        start, step = int(torch.randint(0, 62, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g))
        out.append([2 + (start + i * step) % 62 for i in range(k - 1)] + [EOS])
    return out


class Tokenizer:
    pad_token_id, eos_token_id, padding_side, name_or_path = PAD, EOS, "right", "toy"

    def __len__(self):
        return VOCAB


class Collate:
    """Pads to 16; `buggy`: the mask is all ones (it covers the pads), the labels are the ids
    (pads labelled), and every 7th sample's loss weight is NaN."""

    def __init__(self, buggy=False, unused_nan=False, shifted=False):
        self.tokenizer, self.buggy, self.unused_nan, self.count = Tokenizer(), buggy, unused_nan, 0
        self.shifted = shifted

    def __call__(self, seqs):
        ids = torch.full((len(seqs), 16), PAD)
        mask = torch.zeros((len(seqs), 16), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        weights = torch.ones(len(seqs))
        labels = ids.masked_fill(mask == 0, -100)
        if self.buggy:
            labels, mask = ids.clone(), torch.ones_like(mask)
            for i in range(len(seqs)):
                if (self.count + i) % 7 == 3:
                    weights[i] = float("nan")
        if self.shifted:  # shifted by hand for a model whose loss shifts again
            labels = torch.cat([labels[:, 1:], torch.full((len(seqs), 1), -100)], dim=1)
        self.count += len(seqs)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "loss_weights": weights}
        if self.unused_nan:  # a NaN in a field the training never reads
            batch["scores"] = torch.ones(len(seqs))
            batch["scores"][0] = float("nan")
        return batch


def buggy_loader():
    return DataLoader(sequences(64, 0), batch_size=8, collate_fn=Collate(buggy=True))


def clean_loader():
    return DataLoader(sequences(64, 0), batch_size=8, collate_fn=Collate())


def shifted_loader():
    return DataLoader(sequences(64, 0), batch_size=8, collate_fn=Collate(shifted=True))


def unused_nan_loader():
    return DataLoader(sequences(64, 0), batch_size=8, collate_fn=Collate(unused_nan=True))


def eval_loader():
    return DataLoader(sequences(16, 1), batch_size=8, collate_fn=Collate())


def tuple_loader():
    """nanoGPT: (x, y) windows of one token stream, y shifted by one; no padding, no mask."""
    stream = torch.tensor([t for s in sequences(40, 2) for t in s])
    g = torch.Generator().manual_seed(0)
    for _ in range(6):
        starts = torch.randint(len(stream) - 17, (4,), generator=g)
        yield torch.stack([stream[s : s + 16] for s in starts]), torch.stack([stream[s + 1 : s + 17] for s in starts])


def classes_loader():
    """Sentence classification: the label is whether the progression steps by 1; every 5th
    sample's weight is NaN."""
    out = []
    for b in range(8):
        seqs = sequences(8, 10 + b)
        ids = torch.full((8, 16), PAD)
        mask = torch.zeros((8, 16), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        labels = torch.tensor([int(len(s) > 2 and (s[1] - s[0]) % 62 == 1) for s in seqs])
        weight = torch.ones(8)
        weight[b % 5] = float("nan")
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels, "weight": weight})
    return out


def text_loader():
    return [{"text": ["a sentence", "another one"]}]


class MeanClassifier(torch.nn.Module):
    """A sentence classifier: its (batch, 2) output cannot learn the loaders' next tokens."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = torch.nn.Embedding(VOCAB, 8), torch.nn.Linear(8, 2)

    def forward(self, input_ids, attention_mask=None):
        return self.head(self.emb(input_ids).mean(dim=1))


def build_classifier():
    return MeanClassifier()


def broken_factory():
    raise RuntimeError("no weights here")


def build_gpt():
    import transformers

    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=EOS, eos_token_id=EOS)
    return transformers.GPT2LMHeadModel(config)
'''


@pytest.fixture(scope="module")
def loaders(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data_ab")
    (root / "ab_loaders.py").write_text(textwrap.dedent(LOADERS))
    return root


def gpt():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=1, eos_token_id=1)
    return transformers.GPT2LMHeadModel(config).eval()


def context(root: Path, loader: str | None, model=None, causal=True, eval_loader: str | None = "eval_loader"):
    torch.set_num_threads(1)
    ctx = ProbeContext(model if model is not None else gpt(), Caller("input_ids,attention_mask"), vocab_size=VOCAB,
                       pad_token_id=0, seq_len=16, batch_size=4, causal=causal, padding_side="right", device="cpu",
                       seed=0)
    ctx.training = TrainingSettings()
    ctx.data = None if loader is None else {
        "dataloader": f"ab_loaders:{loader}", "root": str(root), "batches": 50,
        "eval_dataloader": f"ab_loaders:{eval_loader}" if eval_loader else None}
    return ctx


def run(ctx):
    try:
        return DataABProbe().run(ctx)
    finally:
        sys.modules.pop("ab_loaders", None)


def test_nan_rows_and_a_mask_over_the_pads_are_found_and_the_checks_named(loaders):
    model = gpt()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = run(context(loaders, "buggy_loader", model))
    assert result.status == "fail", result.detail
    assert result.figure == 1.0  # the user-data run diverges (NaN loss weights), the cleaned run learns
    assert "the data pipeline is at fault" in result.detail
    named = {(c["check"], c["loader"]) for c in result.extra["data_checks"]}
    assert {("nan-inf", "train"), ("mask-pad-agreement", "train")} <= named
    assert "nan-inf (train, TL110/TL112), mask-pad-agreement (train, TL101/TL113) (the cleaning fixes these)" \
        in result.detail
    cleaning = result.extra["cleaning"]
    assert cleaning["rows"] == 64 and cleaning["rows_dropped"] == 9
    assert cleaning["dropped_by_field"] == {"loss_weights": 9}
    assert cleaning["mask_changed"] > 300 and cleaning["targets_changed"] == cleaning["mask_changed"]
    curves = result.extra["curves"]
    user, cleaned = curves["user"], curves["cleaned"]
    assert user["diverged_at"] == 1 and user["final_eval_loss"] is None and user["train_loss"] == [None]
    assert len(cleaned["train_loss"]) == 40 and cleaned["eval_steps"] == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    assert cleaned["eval_loss"][-1] < cleaned["eval_loss"][0] * 0.95  # the cleaned run recovers: it learns
    assert [r["seed"] for r in result.extra["runs"]] == [0, 1]
    # the weights are restored: the later probes see the model as built
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_labels_shifted_twice_are_found_without_any_nan(loaders):
    result = run(context(loaders, "shifted_loader"))
    assert result.status == "fail", result.detail
    assert result.extra["cleaning"]["rows_dropped"] == 0 and result.extra["cleaning"]["mask_changed"] == 0
    assert result.extra["cleaning"]["targets_changed"] > 300
    assert [c["check"] for c in result.extra["data_checks"]][:1] == ["label-alignment"]
    assert all(r["lost"] > 0.5 for r in result.extra["runs"])


def test_the_demo_loaders_are_at_fault(tmp_path):
    """fixtures/demo's loaders (NaN sentence weights, labels shifted by hand, EOS masked as pad,
    an eval loader padded on the left) with a GPT-2 of their vocabulary."""
    demo = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
    sys.path.insert(0, str(demo))
    try:
        import loaders as demo_loaders

        vocab = len(demo_loaders.WordTokenizer(demo_loaders.SENTENCES))
    finally:
        sys.path.remove(str(demo))
        sys.modules.pop("loaders", None)
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    ctx = context(demo, None, transformers.GPT2LMHeadModel(config).eval())
    ctx.vocab_size = vocab
    ctx.data = {"dataloader": "loaders:train_loader", "eval_dataloader": "loaders:eval_loader", "root": str(demo),
                "pad_token_id": 0, "eos_token_id": 0, "batches": 50}
    try:
        result = DataABProbe().run(ctx)
    finally:
        sys.modules.pop("loaders", None)
    assert result.status == "fail", result.detail
    failing = {(c["check"], c["loader"]) for c in result.extra["data_checks"]}
    assert {("nan-inf", "train"), ("label-alignment", "train"), ("eos-masked", "train"),
            ("tokenizer-agreement", "train+eval")} <= failing
    cleaning = result.extra["cleaning"]
    assert cleaning["rows_dropped"] == 2 and cleaning["eval_rows_dropped"] == 1
    assert "eval batches re-padded from left padding with pad id 0 to the train loader's right padding" in \
        cleaning["notes"][0]


def test_a_clean_loader_gives_no_finding(loaders):
    result = run(context(loaders, "clean_loader"))
    assert result.status == "pass", result.detail
    assert result.figure == 0.0 and "cleaning changed nothing" in result.detail
    assert result.extra["data_checks"] == [] or all(c["check"] in ("loader-order", "pad-ratio")
                                                   for c in result.extra["data_checks"])
    curves = result.extra["curves"]
    assert curves["user"] == curves["cleaned"] and len(curves["user"]["train_loss"]) == 40


def test_rows_dropped_for_a_field_nothing_reads_give_no_finding_and_the_same_figures_twice(loaders):
    first = run(context(loaders, "unused_nan_loader"))
    assert first.status == "pass", first.detail
    assert first.extra["cleaning"]["dropped_by_field"] == {"scores": 8}
    assert first.figure < first.tolerance and first.tolerance >= 0.25
    assert "fails above 25% and 3x the seed spread" in first.detail
    # a pass holds only when the planted bug (labels shifted once more) is caught on this model
    control = first.extra["control"]
    assert control["caught"] and control["figure"] > first.tolerance, control
    assert "control: labels shifted one position further" in first.detail
    second = run(context(loaders, "unused_nan_loader"))
    assert (second.status, second.figure, second.tolerance) == (first.status, first.figure, first.tolerance)
    assert second.extra["curves"] == first.extra["curves"] and second.extra["runs"] == first.extra["runs"]


def test_a_model_that_barely_learns_is_no_evidence(loaders):
    ctx = context(loaders, "unused_nan_loader")
    ctx.training = TrainingSettings(lr=1e-7)
    result = run(ctx)
    assert result.status == "skip" and "the cleaned run barely learned" in result.detail
    assert "lr 1e-07" in result.detail


def test_runs_cut_short_by_max_seconds_do_not_compare(loaders):
    ctx = context(loaders, "shifted_loader")
    ctx.training = TrainingSettings(max_seconds=0.01)
    result = run(ctx)
    assert result.status == "skip" and "max-seconds (0.01 s) ran out" in result.detail


def test_an_xy_tuple_loader_without_padding_has_nothing_to_clean(loaders):
    result = run(context(loaders, "tuple_loader", eval_loader=None))
    assert result.status == "pass", result.detail
    assert "cleaning changed nothing" in result.detail and "held-out batch" in result.detail
    assert result.extra["kind"] == "next-token" and result.extra["steps"] == 40


class Classifier(torch.nn.Module):
    """Embeddings, one encoder layer, mean over the real tokens, two classes."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 32)
        self.pos = torch.nn.Embedding(16, 32)
        self.layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        x = self.emb(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        x = self.layer(x, src_key_padding_mask=attention_mask == 0)
        keep = attention_mask.unsqueeze(-1).float()
        return self.head((x * keep).sum(dim=1) / keep.sum(dim=1))


def test_per_sample_labels_with_nan_weights_are_found(loaders):
    torch.manual_seed(0)
    result = run(context(loaders, "classes_loader", Classifier().eval(), causal=False, eval_loader=None))
    assert result.status == "fail", result.detail
    assert result.extra["kind"] == "classification"
    assert result.extra["cleaning"]["dropped_by_field"] == {"weight": 6}  # one row in each of the 6 trained batches
    assert "held-out batch" in result.extra["eval_source"]
    assert "nan-inf (train, TL110/TL112)" in result.detail


def test_what_it_cannot_see_is_a_skip_with_the_reason(loaders):
    result = run(context(loaders, None))
    assert result.status == "skip" and "no `dataloader` configured" in result.detail
    result = run(context(loaders, "text_loader", eval_loader=None))
    assert result.status == "skip" and result.detail.startswith("could not run: the data loader")
    assert "no token-id field" in result.detail

    result = run(context(loaders, "clean_loader", Classifier()))  # per-sample output, per-token labels
    assert result.status == "skip" and "no per-sample integer labels" in result.detail
    assert result.figure is None
    result = run(context(loaders, "clean_loader", causal=False))
    assert result.status == "skip" and "not causal" in result.detail


@pytest.mark.parametrize("side, expected", [("right", [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]),
                                            ("left", [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])])
def test_the_mask_recomputed_when_the_pad_id_is_the_eos_id(side, expected):
    ids = torch.tensor([[5, 6, 1, 1, 1], [5, 6, 7, 8, 1]]) if side == "right" else \
        torch.tensor([[1, 1, 5, 6, 1], [5, 6, 7, 8, 1]])
    keep = recompute_keep(ids, Facts(pad=1, eos=1, side=side))
    assert keep.long().tolist() == expected
    assert recompute_keep(ids, Facts(pad=1, eos=2, side=side)).long().tolist() == (ids != 1).long().tolist()
    assert recompute_keep(ids, Facts(pad=None, eos=None, side=side)) is None


def test_an_eval_batch_is_repadded_the_train_loaders_way():
    ids = torch.tensor([[9, 9, 5, 6, 7], [5, 6, 7, 8, 4]])
    keep = ids != 9
    new_ids, new_keep = _repad(ids, keep, pad=0, side="right")
    assert new_ids.tolist() == [[5, 6, 7, 0, 0], [5, 6, 7, 8, 4]]
    assert new_keep.long().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_data_ab_is_named_on_its_own_and_reaches_the_child_and_the_json(loaders, tmp_path, monkeypatch):
    assert "data-ab" not in select_probes(None) and "data-ab" not in select_probes(["training"])
    assert select_probes(["data-ab", "mask-leak"]) == ["mask-leak", "data-ab"]
    config = tmp_path / "tlint.toml"
    config.write_text(textwrap.dedent(f"""
        [verify]
        model = "ab_loaders:build_gpt"
        python-path = ["{loaders}"]
        dataloader = "ab_loaders:buggy_loader"
        eval-dataloader = "ab_loaders:eval_loader"
    """))
    from tlint.cli import build_parser
    from tlint.verify.command import load_options

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["verify", "--probe", "data-ab", "--config", str(config)])
    options = load_options(args)
    assert options.probes == ["data-ab"]
    assert options.data is not None and options.data["dataloader"] == "ab_loaders:buggy_loader"
    assert options.data["eval_dataloader"] == "ab_loaders:eval_loader"
    assert load_options(build_parser().parse_args(["verify", "--config", str(config)])).data is None  # not asked
    from tlint.verify.worker import verify

    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        result = verify(options)
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode
        sys.modules.pop("ab_loaders", None)
    entry = result["probes"][0]
    assert entry["probe"] == "data-ab" and entry["status"] == "fail", entry["detail"]
    document = report_json(result["model"], result["probes"], [])
    probe = document["probes"][0]
    assert set(probe["curves"]) == {"user", "cleaned"}
    assert {c["check"] for c in probe["data_checks"]} >= {"nan-inf", "mask-pad-agreement"}
    assert probe["ab"]["steps"] == 40 and probe["ab"]["threshold"] == 0.25 and probe["ab"]["seeds"] == [0, 1]


def ab_options(loaders: Path, tmp_path: Path, monkeypatch, extra: str, flags: tuple[str, ...] = ()):
    config = tmp_path / "tlint.toml"
    config.write_text(textwrap.dedent(f"""
        [verify]
        model = "ab_loaders:build_classifier"
        python-path = ["{loaders}"]
        dataloader = "ab_loaders:buggy_loader"
        eval-dataloader = "ab_loaders:eval_loader"
    """) + extra)
    from tlint.cli import build_parser
    from tlint.verify.command import load_options

    monkeypatch.chdir(tmp_path)
    return load_options(build_parser().parse_args(["verify", "--probe", "grad-flow", "--probe", "data-ab",
                                                   "--config", str(config), *flags]))


def verify_in_process(options):
    from tlint.verify.worker import verify

    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        return verify(options)
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode
        sys.modules.pop("ab_loaders", None)


def test_data_ab_model_trains_its_own_model_beside_the_verified_one(loaders, tmp_path, monkeypatch):
    """`model` is a classifier the LM batches cannot train; `data-ab-model` (a GPT-2 built in
    code) is what data-ab trains, while the other probes keep verifying `model`."""
    options = ab_options(loaders, tmp_path, monkeypatch, 'data-ab-model = "ab_loaders:build_gpt"\n')
    assert options.data_ab_model == "ab_loaders:build_gpt" and options.data_ab_model_kwargs == {}
    result = verify_in_process(options)
    assert result["model"]["class"] == "MeanClassifier"
    probes = {p["probe"]: p for p in result["probes"]}
    assert probes["grad-flow"]["status"] == "pass"
    ab = probes["data-ab"]
    assert ab["status"] == "fail", ab["detail"]
    assert ab["detail"].endswith("the model trained: GPT2LMHeadModel of data-ab-model `ab_loaders:build_gpt`")
    model = report_json(result["model"], result["probes"], [])["probes"][1]["ab"]["model"]
    assert model["class"] == "GPT2LMHeadModel" and model["causal"] is True and model["vocab_size"] == VOCAB
    assert model["call"] == "input_ids,attention_mask"
    # without it, data-ab on the classifier skips: its output is per sample
    plain = verify_in_process(ab_options(loaders, tmp_path, monkeypatch, ""))
    assert plain["probes"][1]["status"] == "skip" and "one prediction per sample" in plain["probes"][1]["detail"]


def test_a_data_ab_model_that_cannot_be_built_skips_data_ab_only(loaders, tmp_path, monkeypatch):
    options = ab_options(loaders, tmp_path, monkeypatch, "", ("--data-ab-model", "ab_loaders:broken_factory",
                                                               "--data-ab-model-kwargs", '{"size": 3}'))
    assert options.data_ab_model_kwargs == {"size": 3}
    result = verify_in_process(options)
    grad, ab = result["probes"]
    assert grad["status"] == "pass" and ab["status"] == "skip"
    assert ab["detail"].startswith("could not run: the data-ab model `ab_loaders:broken_factory` (`data-ab-model`): ")
    assert "RuntimeError" in ab["detail"] or "unexpected keyword" in ab["detail"]


@pytest.mark.parametrize("setting, message", [
    ('data-ab-model = "not a path"\n', "`data-ab-model` must be a dotted path `package.module:name`"),
    ('data-ab-model = "m:f"\ndata-ab-model-kwargs = 3\n',
     "`data-ab-model-kwargs` in [tool.tlint.verify] must be a table of keyword arguments, got 3"),
])
def test_a_wrong_data_ab_model_setting_is_exit_2_with_a_message(tmp_path, monkeypatch, capsys, setting, message):
    from tlint.cli import main

    (tmp_path / "tlint.toml").write_text('[verify]\nmodel = "m:f"\n' + setting)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--probe", "data-ab"]) == 2
    assert message in capsys.readouterr().err
    assert main(["verify", "--data-ab-model-kwargs", "[1", "--probe", "data-ab"]) == 2
    assert "--data-ab-model-kwargs must be a JSON object" in capsys.readouterr().err
