"""bench/mutants.py: each operator's sites and edits on small examples, the found test,
and one mutant run end to end on a tiny repository (the full benchmark is run by hand)."""

from __future__ import annotations

import collections
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

# slow: runs the mutation benchmark's operators on real trees
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _load():
    name = "tlint_bench_mutants"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


mutants = _load()
OPERATORS = {op.name: op for op in mutants.OPERATORS}

TRAIN = textwrap.dedent('''\
    import torch
    from torch.cuda.amp import GradScaler
    from transformers import get_linear_schedule_with_warmup


    def train(model, loader, val_loader, epochs=3, warmup_steps=100):
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps, num_training_steps=1000)
        scaler = GradScaler()
        for epoch in range(epochs):
            model.train()
            for batch in loader:
                loss = model(**batch).loss
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()
            evaluate(model, val_loader)


    @torch.no_grad()
    def evaluate(model, val_loader):
        model.eval()
        total = 0.0
        for batch in val_loader:
            total += model(**batch).loss.item()
        return total
''')

LOOP = ["loss = model(**batch).loss", "scaler.scale(loss).backward()", "scaler.unscale_(optimizer)",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "scaler.step(optimizer)", "scaler.update()",
        "scheduler.step()", "optimizer.zero_grad()"]


def loop_body(text: str) -> list[str]:
    """The statements of the batch loop of TRAIN (or its mutant), stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "for batch in loader:") + 1
    out = []
    for line in lines[start:]:
        if not line.startswith(" " * 12):
            break
        out.append(line.strip())
    return out


def mutated(name: str, text: str = TRAIN) -> list[str]:
    op = OPERATORS[name]
    count = len(mutants.mutations_of(op, text, "train.py"))
    return [mutants.mutate(text, op, k) for k in range(count)]


def test_every_mutant_parses_and_differs_from_the_original():
    for op in mutants.OPERATORS:
        for text in mutated(op.name):
            cst.parse_module(text)
            assert text != TRAIN, op.name


def test_remove_clip_and_remove_zero_grad_drop_one_statement():
    [no_clip] = mutated("remove-clip")
    assert loop_body(no_clip) == [s for s in LOOP if not s.startswith("torch.nn.utils.clip_grad_norm_")]
    [no_reset] = mutated("remove-zero-grad")
    assert loop_body(no_reset) == LOOP[:-1]


def test_moves_follow_the_bug_each_operator_plants():
    [late_clip] = mutated("clip-after-step")
    assert loop_body(late_clip) == LOOP[:3] + [LOOP[4], LOOP[3]] + LOOP[5:]
    [early_clip] = mutated("clip-before-unscale")
    assert loop_body(early_clip) == LOOP[:2] + [LOOP[3], LOOP[2]] + LOOP[4:]
    [early_schedule] = mutated("scheduler-before-step")
    assert loop_body(early_schedule) == LOOP[:4] + [LOOP[6], LOOP[4], LOOP[5], LOOP[7]]


def test_a_scheduler_stepped_on_a_metric_is_not_moved():
    """`ReduceLROnPlateau.step(val_score)` has no order with the optimiser step to break."""
    plateau = TRAIN.replace("scheduler.step()", "scheduler.step(loss.item())")
    assert plateau != TRAIN
    assert mutated("scheduler-before-step", plateau) == []


def test_remove_eval_needs_a_loop_after_the_switch():
    [no_eval] = mutated("remove-eval")
    assert "model.eval()" not in no_eval and "model.train()" in no_eval
    assert mutated("remove-eval", "def f(model, x):\n    model.eval()\n    return model(x)\n") == []


def test_remove_eval_needs_an_evaluation_loop_of_the_switched_model():
    """A switch before a training loop (a frozen encoder), before a loop over the model's
    parameters, or before a loop that does not run that model plants no evaluation bug."""
    text = textwrap.dedent('''\
        def train(encoder, decoder, loader, optimizer):
            encoder.eval()  # frozen feature extractor: the loop after it trains the decoder
            for x in loader:
                loss = decoder(encoder(x)).mean()
                loss.backward()
                optimizer.step()


        def freeze(self):
            self.model.eval()
            for p in self.model.parameters():
                p.requires_grad = False


        def report(model, rows):
            model.eval()
            for row in rows:
                print(row)


        def validate(model, val_loader):
            model.eval()
            with torch.no_grad():
                for x in val_loader:
                    print(accelerator.unwrap_model(model).generate(x))


        def drain(model, queue):
            model.eval()
            while queue:
                print(model(queue.pop()))
    ''')
    whats = [(m.line, m.what) for m in mutants.mutations_of(OPERATORS["remove-eval"], text, "train.py")]
    assert whats == [(22, "removed `model.eval()`"), (29, "removed `model.eval()`")]


def test_remove_warmup_sets_each_warmup_length_to_zero():
    texts = mutated("remove-warmup")
    assert [t for t in texts if "warmup_steps=0)" in t] and [t for t in texts if "num_warmup_steps=0," in t]
    assert len(texts) == 2
    more = textwrap.dedent('''\
        import argparse, torch
        from transformers import get_cosine_schedule_with_warmup
        parser = argparse.ArgumentParser()
        parser.add_argument("--warmup_ratio", type=float, default=0.1)
        warmup_iters = 2000
        sched = get_cosine_schedule_with_warmup(opt, 500, 10_000)
        prof = torch.profiler.schedule(wait=1, warmup=1, active=3)  # profiling, not a learning rate
        none = get_cosine_schedule_with_warmup(opt, 0, 10_000)  # already no warmup
    ''')
    out = mutated("remove-warmup", more)
    assert len(out) == 3
    assert any("default=0)" in t for t in out) and any("warmup_iters = 0" in t for t in out)
    assert any("get_cosine_schedule_with_warmup(opt, 0, 10_000)\nprof" in t for t in out)


def test_an_emptied_block_gets_pass():
    text = "def step(opt, model):\n    if clip:\n        torch.nn.utils.clip_grad_value_(model.parameters(), 1)\n    opt.step()\n"
    [out] = mutated("remove-clip", text)
    assert "    if clip:\n        pass\n    opt.step()" in out


def test_files_not_searched():
    op = OPERATORS["remove-zero-grad"]
    assert op.searches("src/train.py", "opt.zero_grad()")
    assert not op.searches("tests/test_train.py", "opt.zero_grad()")
    assert not op.searches("bench.py", "opt.zero_grad()")
    assert not op.searches("train.py", "opt.step()")
    assert not OPERATORS["remove-eval"].searches("sample.py", "model.eval()\nfor x in y: pass")
    assert not OPERATORS["remove-warmup"].searches("config/small.py", "warmup_iters = 100\n")
    assert mutants.mutations_of(op, "def broken(:\n    opt.zero_grad()\n") == []


def test_found_means_more_findings_of_an_expected_code_in_some_file():
    before = collections.Counter({("train.py", "TL301"): 1, ("train.py", "TL316"): 1})
    more = collections.Counter({("train.py", "TL301"): 2, ("train.py", "TL316"): 1})
    other = collections.Counter({("train.py", "TL301"): 1, ("model.py", "TL304"): 1})
    assert mutants.is_found(before, more, ("TL301",))
    assert not mutants.is_found(before, before, ("TL301", "TL316"))
    assert not mutants.is_found(before, other, ("TL301",))
    assert mutants.is_found(before, other, ("TL304",))
    assert mutants.spread(list(range(10)), 3) == [0, 3, 6] and mutants.spread([1, 2], 0) == [1, 2]


def test_unknown_operator_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        mutants.main(["--operator", "no-such", "--mirrors", str(ROOT)])
    assert exit_info.value.code == 2
    assert "unknown operator no-such" in capsys.readouterr().err


def test_one_tree_end_to_end(tmp_path):
    repo = tmp_path / "mirrors" / "someone+demo"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(TRAIN)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for args in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    tree = mutants.Tree("someone/demo", sha, ("train.py",), "test")
    operators = [OPERATORS["remove-zero-grad"], OPERATORS["clip-after-step"]]
    result = mutants.run_tree(tree, tmp_path / "mirrors", mutants.rb.tlint_command(str(ROOT)), operators, 4)
    assert result["status"] == "ok"
    statuses = {(m["operator"], m["status"]) for m in result["mutants"]}
    assert statuses == {("remove-zero-grad", "found"), ("clip-after-step", "found")}
    table = mutants.tally([result], operators)
    assert table == {"remove-zero-grad": {"found": 1, "total": 1}, "clip-after-step": {"found": 1, "total": 1}}
    assert (repo / "train.py").read_text() == TRAIN  # the mirror is only read


DATA = textwrap.dedent('''\
    import torch.nn as nn
    from transformers import AutoModel, AutoTokenizer, DataCollatorWithPadding


    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.layer = nn.TransformerEncoderLayer(64, 4, batch_first=True)

        def forward(self, x, pad_mask):
            h, _ = self.attn(x, x, x, key_padding_mask=pad_mask)
            return self.layer(h, src_key_padding_mask=pad_mask)


    def embed(texts):
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        model = AutoModel.from_pretrained("bert-base-uncased")
        enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        out = model(enc["input_ids"], attention_mask=enc["attention_mask"])
        again = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
        batch = tokenizer.pad({"input_ids": enc["input_ids"]}, attention_mask=None)
        collated = DataCollatorWithPadding(tokenizer)(texts)
        return out, again, batch, collated, model(attention_mask=enc["attention_mask"])
''')


def test_remove_attention_mask_drops_the_keyword_of_model_calls_with_ids():
    texts = mutated("remove-attention-mask", DATA)
    assert len(texts) == 2  # not the tokenizer's `pad`, not a call without ids
    assert any('out = model(enc["input_ids"])\n' in t for t in texts)
    assert any('again = model(input_ids=enc["input_ids"], output_hidden_states=True)' in t for t in texts)
    assert all(t.count("attention_mask=") == DATA.count("attention_mask=") - 1 for t in texts)


def test_remove_key_padding_mask_drops_each_padding_keyword():
    texts = mutated("remove-key-padding-mask", DATA)
    assert len(texts) == 2
    assert any("self.attn(x, x, x)" in t for t in texts)
    assert any("self.layer(h)" in t for t in texts)
    assert not OPERATORS["remove-attention-mask"].searches("m.py", "model(ids, attention_mask=m)")  # no padding


def test_data_operators_run_on_every_familys_fixed_trees():
    selected = mutants.trees(families=("data",))
    origins = {tree.origin for tree in selected}
    assert "ecosystem" in origins and any(o.startswith("trl-") for o in origins)
    # masks are passed in model and training code too: the data operators search those trees
    assert {tree.family for tree in selected} >= {"", "data", "model", "training"}
    assert not any(o.startswith("trl-") for o in {t.origin for t in mutants.trees(families=("training",))}
                   if o.startswith("trl-grpo"))
    # ... while a training operator run beside them keeps to the ecosystem and its own family's trees
    model_tree = next(tree for tree in selected if tree.family == "model")
    assert model_tree.runs(OPERATORS["remove-attention-mask"])
    assert not model_tree.runs(OPERATORS["remove-clip"])
    assert next(t for t in selected if t.family == "").runs(OPERATORS["remove-clip"])


def test_removing_an_empty_mask_is_no_mutant():
    text = textwrap.dedent('''\
        def score(model, tokenizer, texts):
            enc = tokenizer(texts, padding=True, return_tensors="pt")
            a = model(input_ids=enc["input_ids"], attention_mask=None)
            return model(enc["input_ids"], attention_mask=enc["attention_mask"]), a
    ''')
    texts = mutated("remove-attention-mask", text)
    assert len(texts) == 1 and "model(enc[\"input_ids\"])" in texts[0]


def test_sites_that_plant_no_bug_are_left_out():
    text = textwrap.dedent('''\
        import torch


        class Wrapper:
            def zero_grad(self):
                self.optimizer.zero_grad()

            def clip_grad_norm(self, max_norm):
                return self.inner.clip_grad_norm(max_norm)


        def train(model, criterion, loader, optimizer, amp):
            model.zero_grad()  # before the loop: the loop's own reset stays
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                if amp:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                else:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                model.zero_grad()  # a second reset: removing one plants nothing
            criterion.eval()
            for x, y in loader:
                print(criterion(model(x), y))


        def generate_samples(model, prompts):
            model.eval()
            for p in prompts:
                print(model.generate(p))


        opt = Adafactor(params, warmup_init=True, relative_step=True)
        sched = build(opt, warmup_steps=100, warmup_proportion=0.1)
    ''')
    for name in ("remove-clip", "remove-zero-grad", "remove-eval", "remove-warmup"):
        assert mutants.mutations_of(OPERATORS[name], text, "train.py") == [], name
    one_reset = text.replace("        model.zero_grad()  # a second reset: removing one plants nothing\n", "")
    [only] = mutants.mutations_of(OPERATORS["remove-zero-grad"], one_reset, "train.py")
    assert "optimizer.zero_grad()" in only.what
    by_assignment = one_reset.replace("        optimizer.step()\n", "        optimizer.step()\n        model.head.weight.grad = None\n")
    assert by_assignment != one_reset
    assert mutants.mutations_of(OPERATORS["remove-zero-grad"], by_assignment, "train.py") == []


def test_counts_key_on_the_message_with_its_numbers_blanked():
    finding = mutants.rb.Finding
    old = [finding("t.py", 9, 9, 1, "TL316", "info", "keep the value clip_grad_norm_ returns (line 9)")]
    new = [finding("t.py", 8, 8, 1, "TL316", "info", "compute the norm before the step")]
    moved = [finding("t.py", 12, 12, 1, "TL316", "info", "keep the value clip_grad_norm_ returns (line 12)")]
    codes = {"TL316"}
    assert mutants.is_found(mutants.counts(old, codes), mutants.counts(new, codes), ("TL316",))
    assert not mutants.is_found(mutants.counts(old, codes), mutants.counts(moved, codes), ("TL316",))


def test_a_warmup_that_already_runs_as_zero_is_not_a_site():
    text = textwrap.dedent('''\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--num_warmup_steps", type=int, default=0)
        parser.add_argument("--warmup_ratio", type=float, default=0.1)
        args = parser.parse_args()
        a = get_scheduler("linear", optimizer=opt, num_warmup_steps=args.num_warmup_steps, num_training_steps=10)
        b = get_scheduler("linear", optimizer=opt, num_warmup_steps=args.warmup_ratio * 10, num_training_steps=10)
        c = get_scheduler("linear", optimizer=opt, num_warmup_steps=args.num_warmup_steps * args.accumulation,
                          num_training_steps=10)
    ''')
    whats = [m.what for m in mutants.mutations_of(OPERATORS["remove-warmup"], text, "train.py")]
    assert whats == ['default of "--warmup_ratio" `0.1` -> 0', "num_warmup_steps= `args.warmup_ratio * 10` -> 0"]


def test_a_warmup_that_is_one_of_several_alternatives_or_crashes_at_zero_is_not_a_site():
    """One branch of a scheduler choice (the others still warm up), and a Noam warmup that
    the tree raises to a negative power (0 raises ZeroDivisionError: a crash, not a missing
    warmup), plant no TL304 bug; a lone warmup still does."""
    text = textwrap.dedent('''\
        def build(args, opt, total):
            if args.scheduler == "constant":
                return get_constant_schedule(opt)
            elif args.scheduler == "constant_with_warmup":
                return get_constant_schedule_with_warmup(opt, num_warmup_steps=args.warmup_steps)
            else:
                return get_linear_schedule_with_warmup(opt, num_warmup_steps=args.warmup_steps,
                                                       num_training_steps=total)


        def noam(opt, d_model):
            return LambdaLR(opt, lambda step: rate(step, d_model, factor=1.0, warmup=400))


        def train(opt, total):
            if total > 10:
                sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=100, num_training_steps=total)
    ''')
    schedule = "def rate(step, model_size, factor, warmup):\n    return factor * min(step ** -0.5, step * warmup ** (-1.5))\n"
    crash = mutants.crash_names([text, schedule])
    assert crash == {"warmup"}
    whats = [m.what for m in mutants.mutations_of(OPERATORS["remove-warmup"], text, "train.py", crash)]
    assert whats == ["num_warmup_steps= `100` -> 0"]
    assert mutants.crash_names(["lr = np.power(self.n_warmup_steps, -1.5) * step"]) == frozenset()
    both = [m.what for m in mutants.mutations_of(OPERATORS["remove-warmup"], text, "train.py")]
    assert both == ["warmup= `400` -> 0", "num_warmup_steps= `100` -> 0"]


MODEL = textwrap.dedent('''\
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Attention(nn.Module):
        def __init__(self, d, block_size):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)))

        def forward(self, x, key_padding_mask=None):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            att = att.masked_fill(self.bias[: x.size(1), : x.size(1)] == 0, float("-inf"))
            att = att.masked_fill(key_padding_mask[:, None, :], float("-inf"))
            return F.softmax(att, dim=-1) @ v


    class Block(nn.Module):
        def __init__(self, d, block_size):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = Attention(d, block_size)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x


    class GPT(nn.Module):
        def __init__(self, vocab, d, block_size):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(block_size, d)
            self.block = Block(d, block_size)
            self.lm_head = nn.Linear(d, vocab)

        def forward(self, idx):
            pos_emb = self.wpe(torch.arange(idx.size(1)))
            x = self.wte(idx) + pos_emb
            x = self.block(x)
            return self.lm_head(x)

        def generate(self, idx, n):
            for _ in range(n):
                idx = torch.cat([idx, self(idx)[:, -1:].argmax(-1)], dim=1)
            return idx
''')


@pytest.mark.parametrize("name, before, after", [
    ("remove-causal-mask", 'att = att.masked_fill(self.bias[: x.size(1), : x.size(1)] == 0, float("-inf"))\n', ""),
    ("remove-padding-mask", 'att = att.masked_fill(key_padding_mask[:, None, :], float("-inf"))\n', ""),
    ("remove-positional", "x = self.wte(idx) + pos_emb", "x = self.wte(idx)"),
    ("remove-scaling", "att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))", "att = (q @ k.transpose(-2, -1))"),
    ("drop-residual", "x = x + self.attn(self.ln_1(x))", "x = self.attn(self.ln_1(x))"),
    ("move-norm", "x = x + self.attn(self.ln_1(x))", "x = self.ln_1(x + self.attn(x))"),
])
def test_model_operators_plant_their_bug(name, before, after):
    """Each model operator finds its one site in MODEL and makes exactly its edit."""
    [out] = mutated(name, MODEL)
    assert [line.strip() for line in out.splitlines() if line.strip()] == [
        line.strip() for line in MODEL.replace(before, after).splitlines() if line.strip()]


def test_model_operators_leave_lookalikes_alone():
    text = textwrap.dedent('''\
        import torch


        class Net(torch.nn.Module):
            def forward(self, x, mem_len, labels, attention_mask):
                n = x.shape[1] + mem_len                        # a length, not a positional encoding
                out = x + self.bias.view(1, -1)                 # a bias, not a residual branch of x
                labels = labels.masked_fill(attention_mask == 0, -100)   # labels, not attention scores
                return torch.softmax(self.embed(x) @ x.T, -1), n, out, labels
    ''')
    for name in ("remove-positional", "drop-residual", "remove-padding-mask", "remove-causal-mask"):
        assert mutated(name, text) == [], name


def test_model_operators_plant_no_other_operators_bugs():
    """Sites that are not the operator's bug (issue 21, measured on real model code): a
    self-token mask of shared-QK attention, a post-softmax zeroing, a left-to-right
    (causal) mask or one built from `triu`, a mask or bias being built (not scores) are not
    padding masks; a positional encoding added to the stream and talking heads added to the
    scores are not residual branches; position ids plus an offset are not a positional
    encoding; a query-key product feeding sigmoid gates is not attention scaling."""
    text = textwrap.dedent('''\
        import torch
        import torch.nn.functional as F


        class Net(torch.nn.Module):
            def __init__(self):
                self.pos_emb = torch.nn.Embedding(16, 8)

            def forward(self, x, mask, ltor_mask, key_padding_mask):
                dots = x @ x.transpose(-2, -1)
                self_mask = torch.eye(x.size(1)).bool()
                dots.masked_fill_(self_mask, TOKEN_SELF_ATTN_VALUE)
                dots.masked_fill_(ltor_mask, -10000.0)
                mask = torch.ones(4, 4).triu_(1).bool()
                dots = dots.masked_fill(mask, float("-inf"))
                attn_mask = attn_mask.masked_fill(~key_padding_mask, float("-inf"))
                dots = dots + self.talking_heads(dots)
                attn = F.softmax(dots, dim=-1)
                attn = attn.masked_fill(~key_padding_mask, 0.)
                x = x + self.pos_emb(x)
                position_ids = position_ids + self.layer_past
                return attn @ x, position_ids

            def gates(self, q, k):
                forget = torch.einsum("b i d, b j d -> b i j", q, k) * self.scale
                return F.logsigmoid(forget)
    ''')
    for name in ("remove-padding-mask", "drop-residual", "remove-scaling"):
        assert mutated(name, text) == [], name
    [positional] = mutated("remove-positional", text)  # the encoding's addition, not the ids' offset
    assert "x = x\n" in positional and "position_ids + self.layer_past" in positional
    # the same file with a real padding fill of the scores: that one is a site
    padded = text.replace("dots.masked_fill_(ltor_mask, -10000.0)",
                          'dots = dots.masked_fill(key_padding_mask[:, None], float("-inf"))')
    assert len(mutated("remove-padding-mask", padded)) == 1


def test_model_operators_plant_only_transformer_bugs():
    """More sites that are not the operator's bug (issue 21, measured on real model code):
    a fill under `if self.causal:` (the causal mask), a hash-bucket mask built here from no
    padding parameter, and confidence scores of a sampling loop (no query-key product) are
    not padding fills; a message naming `max_position_embeddings` is not a positional
    encoding; a cross network's `x_i + cross(x_0, x_i)` (the DCN formula, in a class with no
    attention or feed-forward sub-layer) is not a transformer block's residual."""
    text = textwrap.dedent('''\
        import torch


        class LSHAttention(torch.nn.Module):
            def forward(self, qk, v, input_mask=None):
                dots = torch.einsum("bie,bje->bij", qk, qk)
                if self.causal:
                    mask = self.t[:, :, None] < self.t[:, None, :]
                    dots.masked_fill_(mask, float("-inf"))
                else:
                    pair_mask = input_mask[:, :, None] * input_mask[:, None, :]
                    dots.masked_fill_(~pair_mask, float("-inf"))
                bucket_mask = self.buckets[:, :, None] != self.buckets[:, None, :]
                dots.masked_fill_(bucket_mask, float("-inf"))
                return dots.softmax(dim=-1) @ v


        def sample(logits, mask):
            scores = 1 - logits.softmax(dim=-1)
            scores = scores.masked_fill(~mask, -1e9)
            return scores.topk(4).indices


        def check(args):
            raise ValueError("validate_values() " + "max_position_embeddings too small")


        class CrossNet(torch.nn.Module):
            def forward(self, x_0):
                x_i = x_0
                for i in range(self.num_layers):
                    x_i = x_i + self.cross_net[i](x_0, x_i)
                return x_i
    ''')
    [padding] = mutated("remove-padding-mask", text)  # only the fill from the padding parameter
    assert "dots.masked_fill_(~pair_mask" not in padding and "dots.masked_fill_(bucket_mask" in padding
    assert "scores.masked_fill(~mask" in padding
    assert mutated("remove-positional", text) == []
    assert mutated("drop-residual", text) == []
    in_a_block = text.replace("self.cross_net[i](x_0, x_i)", "self.attn(x_i)")
    assert len(mutated("drop-residual", in_a_block)) == 1
