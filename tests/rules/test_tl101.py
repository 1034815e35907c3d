"""TL101 missing-attention-mask: precision guards beyond the rule document.

The rule reports a model call that gets input ids but no attention mask, only when the
file or a *related* file (same folder, or import-connected) pads its sequences.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.lintutil import found, lint_paths, write_tree
from tests.rules.conftest import expected
from tests.rules.conftest import lint as lint_project

CODE = "TL101"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def lint(tmp_path, files):
    # TL003 is kept: a rule that crashes must not pass a "no finding" test
    return set(lint_project(tmp_path, files, [CODE]))


PADDING_COLLATOR = """
    from torch.utils.data import DataLoader
    from transformers import DataCollatorWithPadding


    def make_loader(dataset, tokenizer):
        return DataLoader(dataset, batch_size=8, collate_fn=DataCollatorWithPadding(tokenizer))
"""

# An inference script that passes only the ids. It imports nothing from the project.
PREDICT = """
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")


    @torch.no_grad()
    def predict(batch):
        return model(input_ids=batch["input_ids"]).logits
"""
PREDICT_LINE = 9


# --- cross-file: where the padding happens -----------------------------------------------


def test_padding_in_an_imported_module_in_another_folder_is_seen(tmp_path):
    got = lint(tmp_path, {
        "data/loading.py": PADDING_COLLATOR,
        "train.py": """
            from data.loading import make_loader


            def train(model, dataset, tokenizer):
                for batch in make_loader(dataset, tokenizer):
                    loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
                    loss.backward()
        """,
    })
    assert got == {("train.py", 6, CODE)}


def test_padding_reached_through_a_chain_of_imports(tmp_path):
    got = lint(tmp_path, {
        "pipeline/data.py": PADDING_COLLATOR,
        "pipeline/loop.py": """
            from pipeline.data import make_loader


            def batches(dataset, tokenizer):
                yield from make_loader(dataset, tokenizer)
        """,
        "scripts/train.py": """
            from pipeline.loop import batches


            def train(model, dataset, tokenizer):
                for batch in batches(dataset, tokenizer):
                    model(batch["input_ids"]).loss.backward()
        """,
    })
    assert got == {("scripts/train.py", 6, CODE)}


def test_padding_in_the_same_folder_without_an_import_is_not_seen(tmp_path):
    """A file beside the padding one that neither imports it nor is imported with it by a
    script is not related: the inference script never gets those padded batches."""
    got = lint(tmp_path, {"src/data.py": PADDING_COLLATOR, "src/predict.py": PREDICT})
    assert got == set()


def test_padding_in_a_file_imported_by_the_same_script_is_seen(tmp_path):
    """The trainer and the model that one script imports are related (co-imported), even in
    folders that do not import each other."""
    got = lint(tmp_path, {"data/loading.py": PADDING_COLLATOR, "serving/predict.py": PREDICT,
                          "run.py": """
        from data.loading import make_loader
        from serving.predict import predict


        def main(dataset, tokenizer):
            return [predict(batch) for batch in make_loader(dataset, tokenizer)]
    """})
    assert got == {("serving/predict.py", PREDICT_LINE, CODE)}


def test_padding_only_in_an_unrelated_folder_is_not_seen(tmp_path):
    got = lint(tmp_path, {"experiments/glue/data.py": PADDING_COLLATOR, "serving/predict.py": PREDICT})
    assert got == set()


def test_an_unpadded_project_is_not_flagged(tmp_path):
    assert lint(tmp_path, {"predict.py": PREDICT}) == set()


@pytest.mark.parametrize("layout", ["imported", "co-imported", "same-folder", "unrelated"])
def test_linting_one_file_gives_the_same_findings_as_the_whole_tree(tmp_path, layout):
    files = {"tlint.toml": "", "serving/predict.py": _src(PREDICT)}
    if layout == "imported":
        files["data/loading.py"] = _src(PADDING_COLLATOR)
        files["serving/predict.py"] = "from data.loading import make_loader\n" + _src(PREDICT)
    elif layout == "same-folder":
        files["serving/data.py"] = _src(PADDING_COLLATOR)
    elif layout == "co-imported":
        files["data/loading.py"] = _src(PADDING_COLLATOR)
        files["run.py"] = "import data.loading\nimport serving.predict\n"
    else:
        files["experiments/data.py"] = _src(PADDING_COLLATOR)
    write_tree(tmp_path, files)
    whole = {f for f in found(lint_paths([tmp_path], select=[CODE]).diagnostics, tmp_path)}
    alone = found(lint_paths([tmp_path / "serving" / "predict.py"], select=[CODE]).diagnostics, tmp_path)
    assert alone == whole
    expected = set() if layout in ("unrelated", "same-folder") else {
        ("serving/predict.py", PREDICT_LINE + (layout == "imported"), CODE)}
    assert whole == expected


# --- what counts as padding ---------------------------------------------------------------


@pytest.mark.parametrize("pads", [
    'tokenizer(texts, padding=True, return_tensors="pt")',
    'tokenizer(texts, padding="longest", return_tensors="pt")',
    'tokenizer(texts, padding="max_length", max_length=128, truncation=True)',
    'tokenizer.pad(features, return_tensors="pt")',
])
def test_tokenizer_padding_spellings(tmp_path, pads):
    got = lint(tmp_path, {"infer.py": f"""
        from transformers import AutoModel, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        model = AutoModel.from_pretrained("bert-base-uncased")


        def embed(texts, features):
            enc = {pads}
            return model(input_ids=enc["input_ids"])
    """})
    assert got == {("infer.py", 9, CODE)}


@pytest.mark.parametrize("no_pad", ["padding=False", 'padding="do_not_pad"', "truncation=True"])
def test_tokenizer_calls_that_do_not_pad(tmp_path, no_pad):
    got = lint(tmp_path, {"infer.py": f"""
        from transformers import AutoModel, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        model = AutoModel.from_pretrained("bert-base-uncased")


        def embed(text):
            enc = tokenizer(text, {no_pad}, return_tensors="pt")
            return model(input_ids=enc["input_ids"])
    """})
    assert got == set()


def test_aliased_pad_sequence_counts_as_padding(tmp_path):
    got = lint(tmp_path, {"train.py": """
        import torch as th
        from torch.nn.utils.rnn import pad_sequence as pad_batch


        def collate(rows):
            return {"input_ids": pad_batch([th.tensor(r) for r in rows], batch_first=True)}


        def step(model, rows):
            batch = collate(rows)
            return model(batch["input_ids"])
    """})
    assert got == {("train.py", 11, CODE)}


def test_functional_pad_on_ids_counts_but_not_on_images(tmp_path):
    call = """
        def step(model, input_ids):
            return model(input_ids)
    """
    ids = lint(tmp_path / "a", {"train.py": """
        import torch.nn.functional as F


        def pad_to(token_ids, n):
            return F.pad(token_ids, (0, n - token_ids.size(1)), value=0)
    """ + call})
    images = lint(tmp_path / "b", {"train.py": """
        from torch.nn import functional as F


        def pad_to(image, n):
            return F.pad(image, (1, 1, 1, 1))
    """ + call})
    assert ids == {("train.py", 8, CODE)}
    assert images == set()


# --- what counts as a model call with input ids ------------------------------------------


HEADER = """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    clf = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    enc = tokenizer(["a", "b c"], padding=True, return_tensors="pt")
"""


@pytest.mark.parametrize("call", [
    'model(enc["input_ids"])',
    "model(enc.input_ids)",
    'model(enc["input_ids"].to("cuda"))',
    "model(input_ids=enc.input_ids, labels=enc.input_ids)",
    'model.forward(enc["input_ids"])',
    'model.generate(enc["input_ids"], max_new_tokens=5)',
    'clf(enc["input_ids"])',  # a model by its `from_pretrained`, whatever its name
])
def test_model_call_spellings_are_flagged(tmp_path, call):
    got = lint(tmp_path, {"gen.py": HEADER + f"    out = {call}\n"})
    assert got == {("gen.py", 7, CODE)}


def test_ids_held_in_a_variable_are_followed(tmp_path):
    got = lint(tmp_path, {"gen.py": HEADER + '    ids = enc["input_ids"]\n    out = model(ids)\n'})
    assert got == {("gen.py", 8, CODE)}


def test_aliased_transformers_module(tmp_path):
    got = lint(tmp_path, {"gen.py": """
        import transformers as hf

        tok = hf.AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
        policy = hf.AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
        enc = tok(["a", "b c"], padding=True, return_tensors="pt")
        out = policy(input_ids=enc["input_ids"])
    """})
    assert got == {("gen.py", 6, CODE)}


def test_self_model_in_a_method_is_flagged(tmp_path):
    got = lint(tmp_path, {"wrapper.py": """
        from torch import nn
        from transformers import AutoModel, AutoTokenizer


        class Embedder(nn.Module):
            def __init__(self):
                super().__init__()
                self.tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
                self.backbone = AutoModel.from_pretrained("bert-base-uncased")

            def forward(self, texts):
                enc = self.tokenizer(texts, padding=True, return_tensors="pt")
                return self.backbone(
                    input_ids=enc["input_ids"],
                ).last_hidden_state[:, 0]
    """})
    assert got == {("wrapper.py", 13, CODE)}


@pytest.mark.parametrize("call", [
    "model(**enc)",
    "model.generate(**enc, max_new_tokens=5)",
    'model(enc["input_ids"], enc["attention_mask"])',
    "model(input_ids=enc.input_ids, attention_mask=enc.attention_mask)",
    'model.generate(enc["input_ids"], attention_mask=enc["attention_mask"])',
    'tokenizer.batch_decode(enc["input_ids"])',
    'len(enc["input_ids"])',
    'model.resize_token_embeddings(len(tokenizer))',
])
def test_calls_with_a_mask_or_that_are_not_model_calls_are_clean(tmp_path, call):
    assert lint(tmp_path, {"gen.py": HEADER + f"    out = {call}\n"}) == set()


def test_single_string_inference_is_clean(tmp_path):
    got = lint(tmp_path, {"chat.py": """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
        prompt = "Once upon a time"
        input_ids = tokenizer(prompt, return_tensors="pt").input_ids
        out = model.generate(input_ids, max_new_tokens=40, do_sample=True)
    """})
    assert got == set()


def test_local_model_whose_forward_takes_no_mask_is_left_to_other_rules(tmp_path):
    # nanoGPT-style model: `forward(idx, targets)` cannot take a mask; TL101 stays quiet
    # even in a padded project (TL102/TL103 look inside the model).
    got = lint(tmp_path, {"train.py": """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pad_sequence


        class GPT(nn.Module):
            def __init__(self, vocab_size, d=64):
                super().__init__()
                self.wte = nn.Embedding(vocab_size, d)
                self.lm_head = nn.Linear(d, vocab_size)

            def forward(self, idx, targets=None):
                return self.lm_head(self.wte(idx))


        model = GPT(100)
        input_ids = pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
        logits = model(input_ids)
    """})
    assert got == set()


def test_local_model_whose_forward_takes_a_mask_is_flagged(tmp_path):
    got = lint(tmp_path, {"train.py": """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pad_sequence


        class Tagger(nn.Module):
            def __init__(self, vocab_size, d=64):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, d)
                self.out = nn.Linear(d, 5)

            def forward(self, input_ids, attention_mask=None):
                h = self.embed(input_ids)
                if attention_mask is not None:
                    h = h * attention_mask.unsqueeze(-1)
                return self.out(h)


        tagger = Tagger(100)
        input_ids = pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
        logits = tagger(input_ids)
    """})
    assert got == {("train.py", 21, CODE)}


# --- ids that provably hold no padding, in a project that pads ---------------------------


PADDED_PROJECT = """
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorWithPadding

    tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    collator = DataCollatorWithPadding(tokenizer)
"""


@pytest.mark.parametrize("lines", [
    ['ids = tokenizer.encode("Once upon a time", return_tensors="pt")', "out = model.generate(ids.to('cuda'))"],
    ['enc = tokenizer("Once upon a time", return_tensors="pt")', 'out = model.generate(input_ids=enc["input_ids"])'],
    ['out = model.generate(tokenizer("Hi", return_tensors="pt").input_ids)'],
    ['enc = tokenizer(["a b", "c d"], padding=False, return_tensors="pt")', "out = model(input_ids=enc.input_ids)"],
    ["ids = torch.randint(0, 50257, (2, 16))", "out = model(input_ids=ids)"],
    ["ids = torch.tensor([[0, 2, 3, 1]])", "out = model.generate(input_ids=ids)"],
    ["out = model.generate(input_ids=torch.LongTensor([[0, 2, 3, 1]]).to(model.device))"],
])
def test_ids_that_provably_hold_no_padding_are_clean(tmp_path, lines):
    body = "\n".join("    " + line for line in lines)
    src = "import torch\n" + _src(PADDED_PROJECT) + f"\n\ndef sample():\n{body}\n"
    assert lint(tmp_path, {"sample.py": src}) == set()


@pytest.mark.parametrize("lines", [
    ['enc = tokenizer(texts, padding=True, return_tensors="pt")', 'out = model.generate(enc["input_ids"])'],
    ['enc = tokenizer(texts, padding=args.padding, return_tensors="pt")', 'out = model.generate(enc["input_ids"])'],
    ['enc = tokenizer("one", return_tensors="pt")', 'enc = collator([enc])', 'out = model(input_ids=enc["input_ids"])'],
    ['input_ids = tokenizer("one").input_ids', "input_ids += [0] * 8", "out = model(input_ids=input_ids)"],
    ["ids = torch.tensor(rows)", "out = model(input_ids=ids)"],
    ['for batch in loader:', '    out = model(input_ids=batch["input_ids"])'],
])
def test_ids_of_unknown_or_padded_origin_are_flagged(tmp_path, lines):
    body = "\n".join("    " + line for line in lines)
    src = "import torch\n" + _src(PADDED_PROJECT) + f"\n\ndef sample(texts, rows, loader, args):\n{body}\n"
    line = len(src.splitlines())
    assert lint(tmp_path, {"sample.py": src}) == {("sample.py", line, CODE)}


def test_a_parameter_named_like_the_ids_is_of_unknown_origin(tmp_path):
    src = _src(PADDED_PROJECT) + "\n\ndef step(input_ids):\n    return model(input_ids)\n"
    assert lint(tmp_path, {"step.py": src}) == {("step.py", 9, CODE)}


def test_tokenizers_library_enable_padding_makes_encodes_padded(tmp_path):
    src = _src(PADDED_PROJECT) + _src("""
        def sample(tok):
            tok.enable_padding(length=64)
            ids = tok.encode("one prompt", return_tensors="pt")
            return model(input_ids=ids)
    """)
    line = len(src.splitlines())
    assert lint(tmp_path, {"s.py": src}) == {("s.py", line, CODE)}


DIFFUSION_STEP = """
    {imports}
    from transformers import CLIPTextModel, CLIPTokenizer


    def encode_prompts(prompts):
        tokenizer = CLIPTokenizer.from_pretrained("openai/clip-vit-large-patch14")
        text_encoder = CLIPTextModel.from_pretrained("openai/clip-vit-large-patch14")
        batch = tokenizer(prompts, padding="max_length", truncation=True, return_tensors="pt")
        return text_encoder(batch["input_ids"])[0]
"""


def test_diffusion_text_encoder_convention(tmp_path):
    with_diffusers = DIFFUSION_STEP.replace("{imports}", "from diffusers import UNet2DConditionModel")
    without = DIFFUSION_STEP.replace("{imports}", "import torch")
    assert lint(tmp_path / "a", {"train_dreambooth.py": with_diffusers}) == set()
    assert lint(tmp_path / "b", {"encode.py": without}) == {("encode.py", 9, CODE)}


def test_helper_methods_and_models_that_ignore_their_mask_are_not_flagged(tmp_path):
    # `self._build_network_inputs(...)` is a method of the class, not a model; a recurrent
    # model whose forward says the mask is unused gains nothing from receiving it. A model
    # whose forward applies its mask is still flagged.
    got = lint(tmp_path, {"train.py": """
        import logging

        import torch
        from torch import nn
        from torch.nn.utils.rnn import pad_sequence

        logger = logging.getLogger(__name__)


        class RecurrentModel(nn.Module):
            def forward(self, input_ids, attention_mask=None):
                if attention_mask is not None:
                    logger.warning("`attention_mask` was passed, but it is unused in this model.")
                return self.rnn(self.embed(input_ids))


        class Tagger(nn.Module):
            def forward(self, input_ids, attention_mask=None):
                return self.out(self.embed(input_ids) * attention_mask.unsqueeze(-1))


        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn_model = RecurrentModel()
                self.tagger = Tagger()

            def _build_network_inputs(self, input_ids):
                return input_ids.float()

            def forward(self, input_ids):
                features = self._build_network_inputs(input_ids)
                hidden = self.rnn_model(input_ids)
                return self.tagger(input_ids), hidden, features


        input_ids = pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True)
    """})
    assert got == {("train.py", 34, CODE)}  # the tagger only


def test_an_empty_mask_is_no_mask(tmp_path):
    """Issue 21: `attention_mask=None`, or a local variable bound to None, is no mask; a
    parameter whose default is None passes on what its callers give and counts."""
    files = {
        "collate.py": PADDING_COLLATOR,
        "predict.py": """
            import collate
            from transformers import AutoModelForSequenceClassification

            model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")


            def predict(batch):
                return model(input_ids=batch["input_ids"], attention_mask=None)  # expect: TL101


            def predict_local(batch):
                mask = None
                return model(input_ids=batch["input_ids"], attention_mask=mask)  # expect: TL101


            def predict_given(batch, attention_mask=None):
                return model(input_ids=batch["input_ids"], attention_mask=attention_mask)
        """,
    }
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_ids_spread_from_a_dict_without_a_mask(tmp_path):
    """`model(**inputs)` where every `inputs` reaching the call is a dict literal holding
    padded ids and no mask; a dict with the mask, or one completed later, is clean."""
    src = """
        import torch
        from transformers import AutoModelForCausalLM, DataCollatorWithPadding

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")


        def forward_pass(tokenizer, features, encoder_decoder):
            batch = DataCollatorWithPadding(tokenizer)(features)
            if encoder_decoder:
                inputs = {"input_ids": batch["input_ids"], "decoder_input_ids": batch["labels"]}
            else:
                inputs = {"input_ids": batch["input_ids"]}
            {extra}
            with torch.no_grad():
                return model(**inputs).logits
    """
    bad = _src(src.replace("{extra}", "pass"))
    assert lint(tmp_path / "a", {"m.py": bad}) == {("m.py", 15, CODE)}
    completed = _src(src.replace("{extra}", 'inputs["attention_mask"] = batch["attention_mask"]'))
    assert lint(tmp_path / "b", {"m.py": completed}) == set()
    with_mask = _src(src.replace('{"input_ids": batch["input_ids"]}',
                                 '{"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}')
                     .replace("{extra}", "pass"))
    assert lint(tmp_path / "c", {"m.py": with_mask}) == set()


CAUSAL_STEP = """
    import torch.nn.functional as F

    from batching import get_batch


    def loss_fn(logits, targets):
        logits = logits[..., :-1, :].contiguous()
        targets = targets[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


    def train_step(model, examples, optimizer):
        input_ids, targets = get_batch(examples)
        loss = loss_fn(model(input_ids), targets)
        loss.backward()
        optimizer.step()
        return model.generate(input_ids)
"""


@pytest.mark.parametrize(("padding", "reported"), [
    ("pad_sequence(rows, batch_first=True)", False),
    ('pad_sequence(rows, batch_first=True, padding_side="right")', False),
    ("torch.stack([torch.cat((ids, torch.full((n,), pad_id))) for ids in rows])", False),
    ("torch.stack([F.pad(ids, (0, n), value=pad_id) for ids in rows])", False),
    ("[ids + [pad_id] * (n - len(ids)) for ids in rows]", False),
    ('pad_sequence(rows, batch_first=True, padding_side="left")', True),
    ("torch.stack([torch.cat((torch.full((n,), pad_id), ids)) for ids in rows])", True),
    ("torch.stack([F.pad(ids, (n, 0), value=pad_id) for ids in rows])", True),
    ("[[pad_id] * (n - len(ids)) + ids for ids in rows]", True),
    ("torch.full((len(rows), n), pad_id)", True),
    ('tokenizer(rows, padding=True, truncation=True, return_tensors="pt")["input_ids"]', True),
])
def test_a_causal_forward_is_reported_only_when_pads_may_come_first(tmp_path, padding, reported):
    batching = f"""
        import torch
        import torch.nn.functional as F
        from torch.nn.utils.rnn import pad_sequence


        def get_batch(rows, tokenizer=None, n=64, pad_id=0):
            batch = {padding}
            return batch, None
    """
    got = lint(tmp_path, {"batching.py": batching, "train.py": CAUSAL_STEP})
    forward = ("train.py", 14, CODE)
    assert ("train.py", 17, CODE) in got  # `generate` continues after the pads: always reported
    assert (forward in got) == reported


def test_a_forward_without_a_next_token_loss_is_reported_with_right_padding(tmp_path):
    batching = """
        from torch.nn.utils.rnn import pad_sequence


        def get_batch(rows):
            return pad_sequence(rows, batch_first=True)
    """
    encoder = """
        import torch.nn.functional as F

        from batching import get_batch


        def train_step(model, rows, labels):
            input_ids = get_batch(rows)
            return F.cross_entropy(model(input_ids), labels)
    """
    assert lint(tmp_path, {"batching.py": batching, "train.py": encoder}) == {("train.py", 8, CODE)}


def test_padding_a_list_in_place_at_the_end_is_right_padding(tmp_path):
    batching = """
        import torch


        def get_batch(rows, n=64, pad_id=0):
            out = []
            for ids in rows:
                ids += [pad_id] * (n - len(ids))
                out.append(ids)
            return torch.tensor(out), None
    """
    assert lint(tmp_path, {"batching.py": batching, "train.py": CAUSAL_STEP}) == {("train.py", 17, CODE)}


def test_a_spread_dict_without_a_mask_hides_none(tmp_path):
    src = """
        from transformers import AutoModelForCausalLM, DataCollatorWithPadding

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
        collator = DataCollatorWithPadding(None)


        def forward(batch, enc_dec, extra):
            kwargs = {"decoder_input_ids": batch["labels"]} if enc_dec else {}
            a = model(batch["input_ids"], use_cache=False, **kwargs)
            b = model(batch["input_ids"], use_cache=False, **extra)
            c = model(batch["input_ids"], **{"use_cache": False})
            opts = {}
            opts["attention_mask"] = batch["attention_mask"]
            d = model(batch["input_ids"], **opts)
            e = model(batch["input_ids"], **{"attention_mask": batch["attention_mask"]})
            return a, b, c, d, e
    """
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 9, CODE), ("m.py", 11, CODE)}


def test_extra_arguments_built_by_a_helper_that_filters_the_mask_out(tmp_path):
    """Issue 21: `**kwargs` built by a helper of the file (a method or a function) every
    `return` of which is a dict that cannot hold `attention_mask`: a comprehension that
    drops the reserved keys (the mask among them), a literal without one. A helper that
    may pass the mask on (it keeps every key but the labels, or its keys are unknown), or
    a result written into afterwards, hides the mask as before."""
    files = {"distill.py": """
        import torch
        from transformers import DataCollatorWithPadding

        collator = DataCollatorWithPadding(None)
        SKIP = ("labels",)


        class Distiller:
            _RESERVED = frozenset(("input_ids", "attention_mask", "labels"))

            def _extra(self, inputs, exclude=()):
                reserved = self._RESERVED | set(exclude)
                return {k: v for k, v in inputs.items() if k not in reserved and isinstance(v, torch.Tensor)}

            def _vision(self, inputs):
                if "pixel_values" not in inputs:
                    return {}
                return {k: v for k, v in inputs.items() if k in ("pixel_values", "image_sizes")}

            def _all_but_labels(self, inputs):
                return {k: v for k, v in inputs.items() if k not in SKIP}

            def _maybe(self, inputs, keys):
                return {k: v for k, v in inputs.items() if k not in keys or k.startswith("x")}

            def step(self, model, teacher, inputs):
                extra = self._extra(inputs)
                a = model(input_ids=inputs["input_ids"], **extra)  # expect: TL101
                b = teacher(input_ids=inputs["input_ids"], **self._extra(inputs, exclude=("pixel_values",)))  # expect: TL101
                c = model(input_ids=inputs["input_ids"], **self._vision(inputs))  # expect: TL101
                d = model(input_ids=inputs["input_ids"], **self._all_but_labels(inputs))
                e = model(input_ids=inputs["input_ids"], **self._maybe(inputs, ("attention_mask",)))
                more = self._extra(inputs)
                more["attention_mask"] = inputs["attention_mask"]
                f = model(input_ids=inputs["input_ids"], **more)
                g = teacher(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], **extra)
                return a, b, c, d, e, f, g
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_masks_of_something_else_are_not_the_attention_mask(tmp_path):
    """Issue 21: Longformer's `global_attention_mask`, a `head_mask`, a
    `decoder_attention_mask` do not mask the ids' padding; `input_mask=`/`attn_mask=` may."""
    files = {"m.py": """
        from transformers import AutoModel, DataCollatorWithPadding

        model = AutoModel.from_pretrained("allenai/longformer-base-4096")
        collator = DataCollatorWithPadding(None)


        def encode(batch, glob, heads):
            a = model(batch["input_ids"], global_attention_mask=glob)  # expect: TL101
            b = model(batch["input_ids"], head_mask=heads)  # expect: TL101
            c = model(input_ids=batch["input_ids"], decoder_attention_mask=batch["labels_mask"])  # expect: TL101
            d = model(batch["input_ids"], input_mask=batch["input_mask"])
            e = model(batch["input_ids"], attention_mask=batch["attention_mask"], global_attention_mask=glob)
            return a, b, c, d, e
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


RIGHT_PADDING = """
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    CHECKPOINT = "{checkpoint}"
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForCausalLM.from_pretrained(CHECKPOINT)
    model = get_peft_model(model, config)
    {setup}

    def step(texts):
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        return model(input_ids=enc["input_ids"], labels=enc["input_ids"]).loss{marker}
"""


@pytest.mark.parametrize(
    ("checkpoint", "setup", "flagged"),
    [
        ("gpt2", "", False),  # GPT-2's tokenizer pads on the right: pads follow the text
        ("gpt2", 'model = model.to("cuda")', False),
        ("Salesforce/blip2-opt-2.7b", "", False),  # OPT decodes the captions
        ("facebook/opt-1.3b", "", False),
        ("EleutherAI/pythia-160m", "", False),
        ("EleutherAI/gpt-neo-125m", "", False),
        ("gpt2", 'tokenizer.padding_side = "left"', True),  # the side is set: not provably right
        ("meta-llama/Llama-3.2-1B", "", True),  # Llama's tokenizer pads on the left
        ("bigscience/bloom-560m", "", True),
        ("google/flan-t5-base", "", True),  # not decoder-only
        ("optimus-prime/encoder", "", True),  # `opt` only as a word of the name
    ],
)
def test_right_padding_decoder_checkpoints(tmp_path, checkpoint, setup, flagged):
    marker = "  # expect: TL101" if flagged else ""
    files = {"train.py": RIGHT_PADDING.format(checkpoint=checkpoint, setup=setup, marker=marker)}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_generate_on_a_right_padding_decoder_is_reported(tmp_path):
    # right pads sit between the prompt and the tokens generated after it
    files = {"gen.py": """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_pretrained("gpt2")

        def sample(prompts):
            enc = tokenizer(prompts, padding=True, return_tensors="pt")
            return model.generate(enc["input_ids"], max_new_tokens=8)  # expect: TL101
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_a_checkpoint_given_by_a_parameter_is_unknown(tmp_path):
    files = {"train.py": """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        def step(name, texts):
            tokenizer = AutoTokenizer.from_pretrained(name)
            model = AutoModelForCausalLM.from_pretrained(name)
            enc = tokenizer(texts, padding=True, return_tensors="pt")
            return model(input_ids=enc["input_ids"]).logits  # expect: TL101
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_a_processor_called_on_images_alone_pads_no_ids(tmp_path):
    files = {"train.py": """
        from transformers import AutoModel, AutoProcessor

        processor = AutoProcessor.from_pretrained("google/siglip-base-patch16-224")
        model = AutoModel.from_pretrained("google/siglip-base-patch16-224")

        def embed(images, texts):
            pixels = processor(images=images, padding="max_length", return_tensors="pt")
            ids = processor(text=texts, return_tensors="pt")["input_ids"]
            return model(input_ids=ids, pixel_values=pixels["pixel_values"])
    """}
    assert lint(tmp_path, files) == set()
    files["train.py"] = files["train.py"].replace('processor(text=texts, return_tensors="pt")',
                                                  'processor(text=texts, padding="max_length", return_tensors="pt")')
    files["train.py"] = files["train.py"].replace('pixels["pixel_values"])', 'pixels["pixel_values"])  # expect: TL101')
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_ids_converted_from_hand_padded_tokens(tmp_path):
    files = {"embed.py": """
        import torch
        from pytorch_pretrained_bert import BertModel, BertTokenizer

        PAD = "[PAD]"
        tokenizer = BertTokenizer.from_pretrained("bert-base-uncased")
        model = BertModel.from_pretrained("bert-base-uncased")

        def prepare(token_lists):
            longest = max(len(t) for t in token_lists)
            padded = [t + [PAD] * (longest - len(t)) for t in token_lists]
            indexed_tokens = [tokenizer.convert_tokens_to_ids(t) for t in padded]
            return torch.tensor(indexed_tokens)

        def embed(token_lists):
            indexed_tokens = prepare(token_lists)
            masks = (indexed_tokens > 0).long()
            good = model(indexed_tokens, attention_mask=masks)
            return model(indexed_tokens)  # expect: TL101
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))
    # the same conversion with nothing padded in the project: no pad token to mask
    files["embed.py"] = files["embed.py"].replace("t + [PAD] * (longest - len(t))", "t").replace(
        "  # expect: TL101", "")
    assert lint(tmp_path, files) == set()


@pytest.mark.parametrize(("arguments", "flagged"), [
    ("src_texts=texts", True),  # pads to the longest by default
    ('src_texts=texts, padding="max_length", max_length=64', True),
    ("src_texts=texts, padding=False", False),
    ('src_texts=texts, padding="do_not_pad"', False),
])
def test_prepare_seq2seq_batch_pads_by_default(tmp_path, arguments, flagged):
    marker = "  # expect: TL101" if flagged else ""
    files = {"predict.py": f"""
        from transformers import T5ForConditionalGeneration, T5Tokenizer

        tokenizer = T5Tokenizer.from_pretrained("t5-small")
        model = T5ForConditionalGeneration.from_pretrained("t5-small")

        def predict(texts):
            batch = tokenizer.prepare_seq2seq_batch({arguments}, return_tensors="pt")
            return model.generate(input_ids=batch["input_ids"]){marker}
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))
