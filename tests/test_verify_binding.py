"""`tlint verify`'s call binding: ids and the padding mask bound by forward's parameter names
whatever *args/**kwargs it also takes, the mask's polarity and dtype from its name,
encoder-decoders fed a fixed source with the ids as the decoder's input, sequence-first
models detected and fed (seq, batch), adapters declaring whether they pass a mask; and the
meta-device memory pre-check that runs no initialiser (so torch._dynamo is not imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.torchutil import import_torch

# slow: builds models in child processes that import torch
pytestmark = pytest.mark.slow

torch = import_torch()
nn = torch.nn

from tlint.verify.loading import (  # noqa: E402
    Caller,
    adapter_takes_mask,
    candidate_styles,
    choose_caller,
    mask_is_padding_flag,
)
from tlint.verify.options import VerifyOptions  # noqa: E402


def _options(**kw):
    return VerifyOptions(model="m:f", root="/nonexistent", **kw)


def _batch():
    ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9]])
    return ids, ids != 0


class _Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 4)
        self.seen: dict = {}


class HFStyle(_Recorder):
    """Every Hugging Face model class: named parameters and **kwargs; the second parameter
    is not the mask."""

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, **kwargs):
        self.seen = {"past": past_key_values, "mask": attention_mask}
        return self.emb(input_ids)


class TargetsSecond(_Recorder):
    def forward(self, idx, targets=None, **kwargs):
        self.seen = {"targets": targets, **kwargs}
        return self.emb(idx)


class KeyPaddingByName(_Recorder):
    def forward(self, x, positions=None, *, key_padding_mask=None, **kwargs):
        self.seen = {"positions": positions, "mask": key_padding_mask}
        return self.emb(x)


class PaddingMaskSecond(_Recorder):
    def forward(self, x, padding_mask=None):
        self.seen = {"mask": padding_mask}
        return self.emb(x)


def test_hugging_face_style_forward_binds_the_mask_by_name_not_position():
    model = HFStyle()
    assert candidate_styles(model)[0] == "input_ids,attention_mask"
    ids, keep = _batch()
    caller = choose_caller(model, _options(), [], ids, keep)
    assert caller.style == "input_ids,attention_mask" and caller.has_mask
    caller(model, ids, keep)
    assert model.seen["past"] is None
    assert model.seen["mask"].dtype == torch.long and model.seen["mask"][1].tolist() == [1, 1, 0, 0]


def test_kwargs_forward_without_a_mask_parameter_gets_ids_only():
    model = TargetsSecond()
    assert candidate_styles(model) == ["ids"]
    ids, keep = _batch()
    caller = choose_caller(model, _options(), [], ids, keep)
    caller(model, ids, keep)
    assert caller.style == "ids" and not caller.has_mask and model.seen == {"targets": None}


@pytest.mark.parametrize("model_cls, style", [(KeyPaddingByName, "ids,key_padding_mask"),
                                              (PaddingMaskSecond, "ids,padding_mask")])
def test_padding_mask_polarity_and_dtype_from_its_name(model_cls, style):
    model = model_cls()
    ids, keep = _batch()
    caller = choose_caller(model, _options(), [], ids, keep)
    assert caller.style == style and "True = pad" in caller.convention and "parameter name" in caller.convention
    caller(model, ids, keep)
    mask = model.seen["mask"]
    assert mask.dtype == torch.bool and mask[1].tolist() == [False, False, True, True]
    assert model.seen.get("positions") is None


def test_mask_names():
    assert mask_is_padding_flag("src_key_padding_mask") and mask_is_padding_flag("padding_mask")
    assert not mask_is_padding_flag("attention_mask") and not mask_is_padding_flag("mask")


class HFSeq2Seq(_Recorder):
    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                **kwargs):
        self.seen = {"source": input_ids, "mask": attention_mask, "decoder_mask": decoder_attention_mask}
        return self.emb(decoder_input_ids) + self.emb(input_ids).mean(dim=1, keepdim=True)


class TorchSeq2Seq(_Recorder):
    def forward(self, src, tgt, src_key_padding_mask=None, tgt_key_padding_mask=None):
        self.seen = {"source": src, "mask": src_key_padding_mask, "decoder_mask": tgt_key_padding_mask}
        return self.emb(tgt)


@pytest.mark.parametrize("model_cls, style, pad_flag", [(HFSeq2Seq, "input_ids,decoder_input_ids", False),
                                                        (TorchSeq2Seq, "src,tgt", True)])
def test_encoder_decoder_gets_a_fixed_source_and_the_ids_as_decoder_input(model_cls, style, pad_flag):
    model = model_cls()
    ids, keep = _batch()
    caller = choose_caller(model, _options(), [], ids, keep, vocab_size=16)
    assert caller.style == style and caller.has_mask
    out = caller(model, ids, keep)
    assert out.shape == (3, 4, 4)
    source = model.seen["source"]
    assert source.shape == ids.shape and not torch.equal(source, ids)
    assert ((source == 0) == ~keep).all()  # padded where the ids are
    # the source does not depend on the ids: a fixed sentence per real length
    caller(model, (ids + 3) * keep, keep)
    assert torch.equal(model.seen["source"], source)
    for name in ("mask", "decoder_mask"):
        expected = ~keep if pad_flag else keep.long()
        assert torch.equal(model.seen[name], expected)


class SequenceFirstTagger(nn.Module):
    """nn.TransformerEncoder with batch_first=False: ids (seq, batch)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=False)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

    def forward(self, src, src_key_padding_mask=None):
        return self.encoder(self.emb(src), src_key_padding_mask=src_key_padding_mask)


def test_sequence_first_model_is_detected_and_fed_seq_batch():
    torch.manual_seed(0)
    model = SequenceFirstTagger().eval()
    ids = torch.randint(1, 16, (3, 6))
    keep = torch.ones_like(ids, dtype=torch.bool)
    caller = choose_caller(model, _options(), [], ids, keep)
    assert caller.seq_first and "sequence-first" in caller.convention
    out = caller(model, ids, keep)
    assert out.shape == (3, 6, 8)  # back to (batch, seq)
    alone = caller(model, ids[1:2], keep[1:2])
    assert torch.allclose(out[1:2], alone, atol=1e-5)


def test_batch_first_model_is_not_flipped():
    torch.manual_seed(0)
    model = SequenceFirstTagger().eval()
    for module in model.modules():
        if hasattr(module, "batch_first"):
            module.batch_first = True
    model.encoder.layers[0].self_attn.batch_first = True
    ids = torch.randint(1, 16, (3, 6))
    caller = choose_caller(model, _options(), [], ids, torch.ones_like(ids, dtype=torch.bool))
    assert not caller.seq_first


def test_adapter_declares_its_mask_by_its_signature():
    def with_mask(model, ids, mask):
        return model(ids)

    def without_mask(model, ids):
        return model(ids)

    def declared(model, ids, mask=None):
        return model(ids)

    declared.takes_mask = False  # type: ignore[attr-defined]
    assert adapter_takes_mask(with_mask) and not adapter_takes_mask(without_mask)
    assert not adapter_takes_mask(declared)
    caller = Caller("pkg:without_mask", without_mask, adapter_takes_mask(without_mask))
    assert not caller.has_mask and "takes no mask" in caller.convention
    model = TargetsSecond()
    ids, keep = _batch()
    assert caller(model, ids, keep).shape == (3, 4, 4)


def test_memory_precheck_runs_no_initialiser_and_does_not_import_dynamo(tmp_path):
    (tmp_path / "tiny.py").write_text(textwrap.dedent("""
        import torch.nn as nn

        def build():
            model = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 16), nn.LayerNorm(16))
            nn.init.trunc_normal_(model[1].weight, std=0.02)
            model[1].bias.data.zero_()
            return model
    """), encoding="utf-8")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from tlint.verify.loading import check_memory, UserCodeError
        from tlint.verify.options import VerifyOptions
        import tiny
        check_memory(tiny.build, VerifyOptions(model="tiny:build", root={str(tmp_path)!r}, memory_limit=100))
        assert "torch._dynamo" not in sys.modules, "dynamo imported"
        try:
            check_memory(tiny.build, VerifyOptions(model="tiny:build", root={str(tmp_path)!r}, memory_limit=0.001))
        except UserCodeError as exc:
            print("refused:", exc)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and "1,104 parameters" in proc.stdout


class TimeFirstMixer(nn.Module):
    """Own attention written for (time, batch, channels), no torch attention module: only the
    probe call (one sample's tokens changed) can tell its layout."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.qkv = nn.Linear(8, 24)

    def forward(self, ids):
        x = self.emb(ids)                       # (T, B, C)
        q, k, v = self.qkv(x).transpose(0, 1).split(8, dim=-1)  # (B, T, C)
        weights = (q @ k.transpose(-2, -1) / 8 ** 0.5).softmax(dim=-1)
        return (weights @ v).transpose(0, 1)    # (T, B, C)


def test_sequence_first_without_torch_modules_is_found_by_the_probe_call():
    torch.manual_seed(0)
    model = TimeFirstMixer().eval()
    ids = torch.randint(1, 16, (3, 6))
    keep = torch.ones_like(ids, dtype=torch.bool)
    caller = choose_caller(model, _options(), [], ids, keep)
    assert caller.style == "ids" and caller.seq_first
    out = caller(model, ids, keep)
    assert torch.allclose(out[2:3], caller(model, ids[2:3], keep[2:3]), atol=1e-5)
