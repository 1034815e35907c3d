"""The data scan (`tlint scan-data`, `tlint verify --data`): the demo's broken loaders fail
their checks with a figure, the clean loaders of fixtures/data pass, batch shapes (dicts,
BatchEncoding-like mappings, tuples, plain lists), static findings matched by rule and file,
exit codes and the JSON schema."""

from __future__ import annotations

import json
from collections import UserDict

import pytest

from tests.cliutil import REPO, make_project, run_tlint
from tests.torchutil import import_torch

# slow: runs the demo's data loaders and models
pytestmark = pytest.mark.slow

torch = import_torch()

from tlint.verify.data import CHECKS, DataOptions
from tlint.verify.scan_data import Drawn, _checks, _loader_order, _normalise, _sample_order, _tokenizer_agreement

DEMO = REPO / "fixtures" / "demo"
CLEAN = REPO / "fixtures" / "data"
CHECK_KEYS = {"check", "loader", "status", "rule", "rules", "figure", "unit", "field", "detail", "findings", "extra"}


def _by(document, loader="train"):
    return {c["check"]: c for c in document["checks"] if c["loader"] in (loader, "train+eval")}


def _assert_schema(document):
    assert document["tool"] == "tlint" and document["version"]
    assert set(document["scan"]) >= {"loader", "batches", "samples"}
    for check in document["checks"]:
        assert set(check) == CHECK_KEYS
        assert check["check"] in CHECKS and check["status"] in ("pass", "fail", "skip")
        assert check["rule"] is None or check["rule"] in check["rules"]
        assert check["status"] == "skip" or isinstance(check["figure"], (int, float))
    assert document["summary"] == {"checks": len(document["checks"]),
                                   "failed": sum(c["status"] == "fail" for c in document["checks"])}


# duration: runs the clean loaders over their batches
def test_clean_loaders_pass_and_text_shows_the_histogram():
    proc = run_tlint("scan-data", cwd=CLEAN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sequence lengths (train loader" in proc.stdout and "#" in proc.stdout
    assert "16 checks, 0 failed" in proc.stdout
    assert not list(CLEAN.rglob("__pycache__"))


def test_static_finding_matched_and_confirmed(tmp_path):
    project = make_project(tmp_path, {
        "feed.py": (
            "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
            "class Tokenizer:\n    pad_token_id = 0\n\n"
            "    def __call__(self, texts, padding=None, truncation=False, max_length=16, return_tensors=None):\n"
            "        rows = [[3 + len(w) for w in t.split()][:max_length] for t in texts]\n"
            "        ids = torch.tensor([r + [0] * (max_length - len(r)) for r in rows])\n"
            "        return {'input_ids': ids, 'attention_mask': (ids != 0).long()}\n\n\n"
            "tokenizer = Tokenizer()\n\n\n"
            "def collate(texts):\n"
            "    return tokenizer(texts, padding='max_length', truncation=True, max_length=16, return_tensors='pt')\n\n\n"
            "def train_loader():\n"
            "    return DataLoader(['a b c', 'hello there', 'x'] * 4, batch_size=4, collate_fn=collate)\n"),
        "tlint.toml": '[verify]\ndataloader = "feed:train_loader"\n',
    })
    proc = run_tlint("scan-data", "--format", "json", cwd=project)
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    _assert_schema(document)
    pad = _by(document)["pad-ratio"]
    assert pad["status"] == "fail" and pad["figure"] == 0.875 and pad["findings"] == ["feed.py:18 TL111"]
    # TL111 (practice, off by default) runs because the data scan tests it; TL114 (on by default):
    # the train loader is not shuffled, but its order carries no structure (lengths 3, 2, 1 over
    # and over): the loader-order check could have seen a correlation and found none
    found = {f["code"]: f for f in document["findings"]}
    assert sorted(found) == ["TL111", "TL114"]
    finding = found["TL111"]
    assert finding["code"] == "TL111" and finding["verdict"] == "confirmed" and finding["check"] == "pad-ratio"
    assert found["TL114"]["verdict"] == "not-reproduced" and found["TL114"]["check"] == "loader-order"
    assert _by(document)["tokenizer-agreement"]["status"] == "skip"
    assert not list(project.rglob("__pycache__"))


# duration: each usage error is a separate run of the command in a child process
def test_usage_and_loader_errors_exit_2(tmp_path):
    project = make_project(tmp_path, {
        "feed.py": ("def broken():\n    raise ValueError('no shards found')\n\n\n"
                    "def hangs():\n    while True:\n        yield from ()\n"),
        "tlint.toml": "[verify]\n",
    })
    proc = run_tlint("scan-data", "--format", "json", cwd=project)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["kind"] == "usage"
    proc = run_tlint("scan-data", "--dataloader", "feed:broken", cwd=project)
    assert proc.returncode == 2
    assert "ValueError: no shards found" in proc.stderr and "feed.py:2" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_tlint("scan-data", "--dataloader", "feed:hangs", "--timeout", "1", "--format", "json", cwd=project)
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "timeout" and "did not finish within 1 s" in error["message"]


# duration: runs the demo's real loaders over their batches
def test_demo_loaders_fail_their_checks_with_figures():
    """`tlint verify --data` on the demo: the probes, then the scan under `data`."""
    proc = run_tlint("verify", "--data", "--probe", "mask-leak", "--format", "json", cwd=DEMO)
    assert proc.returncode == 1, proc.stderr
    whole = json.loads(proc.stdout)
    assert [p["probe"] for p in whole["probes"]] == ["mask-leak"]
    assert {"scan", "checks", "findings", "summary"} == set(whole["data"])
    document = {"tool": whole["tool"], "version": whole["version"], **whole["data"]}
    _assert_schema(document)
    assert document["scan"] == {"loader": "loaders:train_loader", "batches": 2, "samples": 8,
                                "eval_loader": "loaders:eval_loader", "eval_batches": 1, "eval_samples": 4}
    checks = _by(document)
    assert checks["nan-inf"]["status"] == "fail" and checks["nan-inf"]["figure"] == 2
    assert checks["nan-inf"]["field"] == "loss_weights" and checks["nan-inf"]["rule"] == "TL110"
    assert checks["nan-inf"]["extra"]["per_field"] == {"loss_weights": {"batches": 2, "nan": 2, "inf": 0}}
    assert checks["pad-ratio"]["status"] == "fail" and checks["pad-ratio"]["figure"] > 0.5
    assert "bucket" in checks["pad-ratio"]["detail"] and len(checks["pad-ratio"]["extra"]["per_batch"]) == 2
    assert checks["label-alignment"]["status"] == "fail" and checks["label-alignment"]["figure"] == 1
    assert checks["eos-masked"]["status"] == "fail" and checks["eos-masked"]["figure"] == 8
    assert checks["tokenizer-agreement"]["status"] == "fail" and "padding side" in checks["tokenizer-agreement"]["detail"]
    assert checks["label-pad-ignored"]["status"] == "pass"
    assert checks["mask-pad-agreement"]["status"] == "pass"
    assert checks["length-histogram"]["status"] == "pass"
    assert checks["loader-order"]["status"] == "fail" and checks["loader-order"]["figure"] == 8
    assert checks["loader-order"]["rule"] == "TL114" and "loader-order" not in _by(document, "eval")
    verdicts = {(f["code"], f["verdict"]) for f in document["findings"]}
    assert ("TL114", "confirmed") in verdicts
    assert not list(DEMO.rglob("__pycache__"))


# --- batch shapes and checks, in process (no child, fast) -------------------------------

def _scan(batches, **options):
    opts = DataOptions(dataloader="m:f", root=".", **options)
    drawn = Drawn("m:f", [_normalise(b, opts, "m:f", i) for i, b in enumerate(batches)], None)
    return {c["check"]: c for c in _checks(drawn, "train", opts)}, drawn


class Encoding(UserDict):
    """A Hugging Face BatchEncoding is a UserDict of tensors."""


def _lm_batch(shift=0, pad_labels=-100):
    ids = torch.tensor([[5, 6, 7, 8, 1, 0, 0, 0], [9, 10, 11, 12, 13, 14, 15, 1]])
    mask = (torch.arange(8) < torch.tensor([[5], [8]])).long()
    labels = torch.full_like(ids, -100)
    labels[:, : 8 - shift] = ids[:, shift:]
    labels[:, : 8 - shift][mask[:, shift:] == 0] = pad_labels
    return ids, mask, labels


def test_batch_encoding_with_unshifted_labels_passes():
    ids, mask, labels = _lm_batch()
    checks, _ = _scan([Encoding(input_ids=ids, attention_mask=mask, labels=labels)], pad_token_id=0, eos_token_id=1)
    assert checks["label-alignment"]["status"] == "pass" and checks["label-alignment"]["figure"] == 0
    assert checks["label-pad-ignored"]["status"] == "pass"
    assert checks["eos-masked"]["status"] == "pass" and "0 of 2" in checks["eos-masked"]["detail"]
    assert checks["mask-pad-agreement"]["status"] == "pass"
    assert checks["pad-ratio"]["figure"] == pytest.approx(3 / 16, abs=1e-4)


def test_labels_shifted_twice_and_pad_labels_kept_fail():
    ids, mask, labels = _lm_batch(shift=1, pad_labels=0)
    checks, _ = _scan([{"input_ids": ids, "attention_mask": mask, "labels": labels}], pad_token_id=0)
    assert checks["label-alignment"]["status"] == "fail" and checks["label-alignment"]["figure"] == 1
    assert checks["label-pad-ignored"]["status"] == "fail" and checks["label-pad-ignored"]["figure"] == 3
    assert checks["eos-masked"]["status"] == "skip"  # no EOS id known


def test_tuples_nanogpt_convention_passes_and_double_shift_fails():
    stream = torch.arange(3, 40)
    x, y = stream[:16].view(2, 8), stream[1:17].view(2, 8)
    checks, _ = _scan([(x, y)])
    assert checks["label-alignment"]["status"] == "pass" and checks["label-alignment"]["figure"] == 1
    y2 = stream[2:18].view(2, 8)
    checks, _ = _scan([(x, y2)])
    assert checks["label-alignment"]["status"] == "fail" and checks["label-alignment"]["figure"] == 2


def test_ids_mask_labels_tuple_and_plain_lists():
    ids, mask, labels = _lm_batch()
    checks, drawn = _scan([(ids, mask, labels)], pad_token_id=0)
    assert drawn.batches[0].names == {"ids": "[0]", "mask": "[1]", "labels": "[2]"}
    assert checks["label-alignment"]["status"] == "pass"
    checks, drawn = _scan([[[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]], pad_token_id=0)
    assert drawn.batches[0].ids.shape == (2, 8)
    assert checks["pad-ratio"]["figure"] == pytest.approx(5 / 16, abs=1e-4)
    assert checks["length-histogram"]["extra"]["bins"][0][0] == 3


def test_mask_disagreeing_with_padding_and_nan_rows_fail():
    ids = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    mask = torch.ones_like(ids)  # 1 on the pad tokens
    features = torch.tensor([[0.5, float("nan")], [1.0, 2.0]])
    checks, _ = _scan([{"input_ids": ids, "attention_mask": mask, "features": features}], pad_token_id=0)
    assert checks["mask-pad-agreement"]["status"] == "fail" and checks["mask-pad-agreement"]["figure"] == 3
    assert checks["nan-inf"]["status"] == "fail" and checks["nan-inf"]["field"] == "features"


def test_pad_ratio_above_half_fails():
    ids = torch.tensor([[5, 0, 0, 0, 0, 0], [6, 7, 0, 0, 0, 0]])
    checks, _ = _scan([{"input_ids": ids, "attention_mask": (ids != 0).long()}])
    assert checks["pad-ratio"]["status"] == "fail" and checks["pad-ratio"]["figure"] == pytest.approx(0.75)


def test_tokenizer_agreement_from_the_padding():
    opts = DataOptions(dataloader="m:f", root=".")
    ids = torch.tensor([[5, 6, 0], [7, 8, 9]])
    right = Drawn("a", [_normalise({"input_ids": ids, "attention_mask": (ids != 0).long()}, opts, "a", 0)], None)
    left_ids = torch.tensor([[0, 5, 6], [7, 8, 9]])
    left = Drawn("b", [_normalise({"input_ids": left_ids, "attention_mask": (left_ids != 0).long()}, opts, "b", 0)],
                 None)
    assert _tokenizer_agreement(right, right)["status"] == "pass"
    entry = _tokenizer_agreement(right, left)
    assert entry["status"] == "fail" and entry["figure"] == 1 and "padding side" in entry["detail"]
    assert _tokenizer_agreement(right, None)["status"] == "skip"


def test_every_clean_fixture_loader_passes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tlint_clean_data_loaders", CLEAN / "loaders.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("train_loader", "eval_loader", "block_loader", "tuple_loader", "list_loader"):
        checks, _ = _scan(list(getattr(module, name)()), pad_token_id=0, eos_token_id=1)
        assert [c for c in checks.values() if c["status"] == "fail"] == [], name
        assert checks["label-alignment"]["status"] == ("skip" if name == "list_loader" else "pass"), name


def test_ids_and_mask_pair_is_not_taken_for_labels():
    ids = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    checks, drawn = _scan([(ids, (ids != 0).long())], pad_token_id=0)
    assert drawn.batches[0].names == {"ids": "[0]", "mask": "[1]"}
    assert checks["label-pad-ignored"]["status"] == "skip"


def test_only_the_projects_own_files_are_linted(tmp_path):
    from tlint.verify.scan_data import _users_file

    root = tmp_path / "build" / "proj"  # an excluded name above the root does not matter
    for name in ("data.py", ".venv/lib/python3.11/site-packages/lib.py", "src/pkg/feed.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    assert _users_file(str(root / "data.py"), [root])
    assert _users_file(str(root / "src/pkg/feed.py"), [root, root / "src"])
    assert not _users_file(str(root / ".venv/lib/python3.11/site-packages/lib.py"), [root])
    assert not _users_file(str(tmp_path / "elsewhere.py"), [root])


# --- loader-order: batch order vs dataset order ------------------------------------------

class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        yield from range(32)


def _order(loader, batches=50):
    return _loader_order(_sample_order(loader, DataOptions(dataloader="m:f", root=".", batches=batches)), "train")


def _texts(lengths, **fields):
    """Tokenised samples of the given lengths (ids never 0, the pad id), with extra fields."""
    gen = torch.Generator().manual_seed(4)
    out = []
    for i, n in enumerate(lengths):
        item = {"input_ids": (torch.randint(1, 50, (n,), generator=gen)).tolist()}
        item.update({k: v[i] for k, v in fields.items()})
        out.append(item)
    return out


def _pad(items):
    """Dynamic padding, as a collator does: ids padded with 0, the mask, per-sample fields."""
    width = max(len(item["input_ids"]) for item in items)
    batch = {"input_ids": torch.tensor([item["input_ids"] + [0] * (width - len(item["input_ids"])) for item in items]),
             "attention_mask": torch.tensor([[1] * len(item["input_ids"]) + [0] * (width - len(item["input_ids"]))
                                             for item in items])}
    for key in items[0]:
        if key != "input_ids" and isinstance(items[0][key], int):
            batch[key] = torch.tensor([item[key] for item in items])
    return batch


def _lengths(n, seed=5):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, 60, (n,), generator=gen).tolist()


def test_loader_order_in_dataset_order_fails_only_when_the_order_follows_length_label_or_source():
    from torch.utils.data import DataLoader

    lengths = _lengths(400)
    shuffled_file = _order(DataLoader(_texts(lengths), batch_size=4, collate_fn=_pad))  # read in order
    assert shuffled_file["status"] == "pass" and shuffled_file["figure"] == 0
    assert "0, 1, 2" in shuffled_file["detail"] and "follows no length, label or source" in shuffled_file["detail"]
    assert len(shuffled_file["extra"]["structure"]["lengths"]) == 64
    by_length = _order(DataLoader(_texts(sorted(lengths)), batch_size=4, collate_fn=_pad))
    assert by_length["status"] == "fail" and by_length["figure"] == 200 and by_length["rule"] == "TL114"
    assert "length: Spearman +1.00" in by_length["detail"] and "SequentialSampler" in by_length["detail"]
    longest_first = _order(DataLoader(_texts(sorted(lengths, reverse=True)), batch_size=4, collate_fn=_pad))
    assert longest_first["status"] == "fail" and "Spearman -1.00" in longest_first["detail"]
    labels = [i * 3 // 400 for i in range(400)]  # three classes, one after the other
    by_label = _order(DataLoader(_texts(lengths, labels=labels), batch_size=4, collate_fn=_pad))
    assert by_label["status"] == "fail" and "label:" in by_label["detail"]
    mixed = torch.randperm(400, generator=torch.Generator().manual_seed(6)).tolist()
    shuffled_labels = _order(DataLoader(_texts(lengths, labels=[labels[i] for i in mixed]), batch_size=4,
                                        collate_fn=_pad))
    assert shuffled_labels["status"] == "pass", shuffled_labels["detail"]
    by_source = _order(DataLoader(_texts(lengths, source=["wiki"] * 200 + ["books"] * 200), batch_size=4,
                                  collate_fn=lambda items: _pad([{k: v for k, v in i.items() if k != "source"}
                                                                 for i in items])))
    assert by_source["status"] == "fail" and "source:" in by_source["detail"]


def test_loader_order_sees_a_sorted_file_whose_first_batches_hold_one_length():
    from torch.utils.data import DataLoader

    lengths = [8] * 300 + sorted(_lengths(300))  # the first 50 batches of 4 hold length 8 only
    entry = _order(DataLoader(_texts(lengths), batch_size=4, collate_fn=_pad))
    assert entry["status"] == "fail" and "length: Spearman" in entry["detail"], entry["detail"]


def test_loader_order_fails_on_concatenated_sources_read_in_order_and_passes_shuffled():
    from torch.utils.data import ConcatDataset, DataLoader

    sources = ConcatDataset([_texts(_lengths(40, 1)), _texts(_lengths(40, 2))])
    entry = _order(DataLoader(sources, batch_size=4, collate_fn=_pad))
    assert entry["status"] == "fail" and "a ConcatDataset of 2 datasets (40, 40 samples)" in entry["detail"]
    shuffled = DataLoader(sources, batch_size=4, collate_fn=_pad, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    assert _order(shuffled)["status"] == "pass"


def test_loader_order_passes_shuffled_loaders_and_unstructured_data_read_in_order():
    from torch.utils.data import DataLoader, RandomSampler

    data = list(range(40))
    entry = _order(DataLoader(data, batch_size=4))
    assert entry["status"] == "pass" and "0, 1, 2" in entry["detail"]  # in order, but nothing to follow
    assert _order(DataLoader(data, batch_size=4), batches=3)["extra"]["indices"] == list(range(12))
    shuffled = DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
    assert _order(shuffled)["status"] == "pass" and "not the dataset's order" in _order(shuffled)["detail"]
    sampled = DataLoader(data, batch_size=4, sampler=RandomSampler(data, generator=torch.Generator().manual_seed(1)))
    assert _order(sampled)["status"] == "pass"
    assert _order(DataLoader(data, batch_size=None, shuffle=True,
                             generator=torch.Generator().manual_seed(2)))["status"] == "pass"


def test_loader_order_skips_when_it_cannot_see_the_order():
    from torch.utils.data import DataLoader

    streamed = _order(DataLoader(_Stream(), batch_size=4))
    assert streamed["status"] == "skip" and "IterableDataset" in streamed["detail"]
    few = _order(DataLoader(list(range(6)), batch_size=2))
    assert few["status"] == "skip" and "too few" in few["detail"]
    generator = _order(iter([[1, 2], [3, 4]]))
    assert generator["status"] == "skip" and "not a torch DataLoader" in generator["detail"]
    assert _loader_order(None, "train")["status"] == "skip"


def test_loader_order_is_a_train_loader_check_only():
    ids = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    opts = DataOptions(dataloader="m:f", root=".", pad_token_id=0)
    drawn = Drawn("m:f", [_normalise({"input_ids": ids}, opts, "m:f", 0)], None)
    assert "loader-order" in {c["check"] for c in _checks(drawn, "train", opts)}
    assert "loader-order" not in {c["check"] for c in _checks(drawn, "eval", opts)}
