"""TL104 tokenizer-mismatch: the cross-file comparison is independent of file order, of
`--jobs`, and of which files are named."""

from __future__ import annotations

import textwrap

import pytest

import tlint.engine
from tests.lintutil import found, lint_paths, write_tree
from tests.rules.conftest import lint as lint_project

CODE = "TL104"

TRAIN = """
from transformers import AutoTokenizer

CHECKPOINT = "bert-base-uncased"
tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
"""
EVAL = """
from transformers import AutoTokenizer as AT


def load():
    return AT.from_pretrained("bert-base-cased")
"""
EXPECTED = {("src/train.py", 4, CODE), ("src/eval.py", 5, CODE)}


def _program(files: dict[str, str], driver: str = "main.py") -> dict[str, str]:
    """`files` and a script that imports each of them: one program. TL104 compares the
    tokenizers of one program only (files that import one another, or that one script
    imports); a folder is not a program."""
    modules = sorted(name[:-3].replace("/", ".") for name in files if name.endswith(".py"))
    return {**files, driver: "".join(f"import {module}\n" for module in modules)}


def _tree(tmp_path):
    write_tree(tmp_path, {"tlint.toml": "", "src/train.py": textwrap.dedent(TRAIN).lstrip("\n"),
                          "src/eval.py": textwrap.dedent(EVAL).lstrip("\n"),
                          "src/main.py": "import eval\nimport train\n"})
    return tmp_path / "src" / "train.py", tmp_path / "src" / "eval.py"


def _found(tmp_path, paths, jobs=1):
    return {f for f in found(lint_paths(paths, select=[CODE], jobs=jobs).diagnostics, tmp_path) if f[2] == CODE}


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("order", ["train-first", "eval-first"])
def test_same_findings_in_any_order_and_with_any_jobs(tmp_path, monkeypatch, jobs, order):
    monkeypatch.setattr(tlint.engine, "_PARALLEL_MIN_BYTES", 0)
    train, evaluate = _tree(tmp_path)
    paths = [train, evaluate] if order == "train-first" else [evaluate, train]
    assert _found(tmp_path, paths, jobs) == EXPECTED
    assert _found(tmp_path, [tmp_path], jobs) == EXPECTED


def test_a_file_linted_alone_gives_its_findings_of_the_whole_tree(tmp_path):
    train, evaluate = _tree(tmp_path)
    assert _found(tmp_path, [train]) == {("src/train.py", 4, CODE)}
    assert _found(tmp_path, [evaluate]) == {("src/eval.py", 5, CODE)}
    message = lint_paths([evaluate], select=[CODE]).diagnostics[0].message
    assert 'train.py:4 (checkpoint "bert-base-cased" vs "bert-base-uncased")' in message


def test_unrelated_folders_are_not_compared(tmp_path):
    got = lint_project(tmp_path, {"glue/train.py": TRAIN, "squad/eval.py": EVAL}, [CODE])
    assert got == []


def test_scripts_of_one_folder_that_share_no_import_are_separate_programs(tmp_path):
    # two scripts side by side, each run on its own: a folder is not a program
    assert lint_project(tmp_path / "apart", {"train.py": TRAIN, "eval.py": EVAL}, [CODE]) == []
    # a script that imports both makes them one program
    together = lint_project(tmp_path / "together", _program({"train.py": TRAIN, "eval.py": EVAL}), [CODE])
    assert set(together) == {("train.py", 4, CODE), ("eval.py", 5, CODE)}


def _notebook(source: str) -> str:
    import json

    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": textwrap.dedent(source).lstrip("\n").splitlines(keepends=True)}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_folder_of_unrelated_notebooks_gives_nothing(tmp_path):
    """A notebook collection: each notebook is its own program, whatever the folder holds."""
    cell = ("{imports}from transformers import AutoTokenizer\n\n"
            'tokenizer = AutoTokenizer.from_pretrained("{checkpoint}")\n'
            'batch = tokenizer(["a text"], padding=True, return_tensors="pt")\n')
    checkpoints = ["gpt2", "bert-base-uncased", "t5-small", "roberta-base"]
    books = {f"nb{n}.ipynb": _notebook(cell.format(imports="", checkpoint=checkpoint))
             for n, checkpoint in enumerate(checkpoints)}
    books["utils.py"] = "def clean(text):\n    return text\n"
    assert lint_project(tmp_path / "books", books, [CODE]) == []
    # a notebook that imports a module of the folder is one program with it
    books["data.py"] = TRAIN
    books["nb0.ipynb"] = _notebook(cell.format(imports="from data import tokenizer as train_tokenizer\n",
                                               checkpoint="gpt2"))
    got = lint_project(tmp_path / "importing", books, [CODE])
    assert {path for path, _, _ in got} == {"nb0.ipynb", "data.py"}


@pytest.mark.parametrize(("a", "b"), [
    ('"gpt2", padding_side="right"', '"gpt2"'),
    ('"gpt2", model_max_length=512', '"gpt2"'),
    ('"gpt2", padding_side=side', '"gpt2", padding_side="left"'),
    ('"gpt2", **kwargs', '"gpt2", use_fast=False'),
])
def test_settings_left_out_or_dynamic_are_not_differences(tmp_path, a, b):
    files = _program({"a.py": f"from transformers import AutoTokenizer\nt = AutoTokenizer.from_pretrained({a})\n",
                      "b.py": f"from transformers import AutoTokenizer\nt = AutoTokenizer.from_pretrained({b})\n"})
    assert lint_project(tmp_path, files, [CODE]) == []


def test_explicit_settings_that_differ_are_reported(tmp_path):
    files = _program({
        "a.py": 'from transformers import AutoTokenizer\nt = AutoTokenizer.from_pretrained("t5-small", model_max_length=512)\n',
        "b.py": 'from transformers import AutoTokenizer\nt = AutoTokenizer.from_pretrained("t5-small", model_max_length=1024)\n'})
    assert set(lint_project(tmp_path, files, [CODE])) == {("a.py", 2, CODE), ("b.py", 2, CODE)}


def test_test_files_and_models_of_their_own_are_not_compared(tmp_path):
    files = {
        "train.py": TRAIN,
        "tests/test_eval.py": "from train import tokenizer\n" + EVAL,
    }
    assert lint_project(tmp_path / "tests-case", files, [CODE]) == []
    files = {
        "distill.py": """
            from transformers import AutoModel, AutoTokenizer

            tok = AutoTokenizer.from_pretrained("roberta-base")
            model = AutoModel.from_pretrained("roberta-base")
        """,
        "other.py": """
            from transformers import AutoModel, AutoTokenizer

            tok = AutoTokenizer.from_pretrained("bert-base-uncased")
            model = AutoModel.from_pretrained("bert-base-uncased")
        """,
    }
    assert lint_project(tmp_path, _program(files), [CODE]) == []


# --- issue 9 transformers triage: decoding tokenizers of separate heads ----------------------

DECODERS = '''
    from transformers import AutoTokenizer


    class MultiHeadDecoder:
        def __init__(self, char_tokenizer):
            self.char_tokenizer = char_tokenizer
            self.bpe_tokenizer = AutoTokenizer.from_pretrained("openai-community/gpt2")
            self.wp_tokenizer = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased")

        def bpe_decode(self, ids):
            return self.bpe_tokenizer.batch_decode(ids)

        def wp_decode(self, ids):
            return [s.replace(" ", "") for s in self.wp_tokenizer.batch_decode(ids)]
'''


def test_tokenizers_only_used_to_decode_their_own_heads_are_not_compared(tmp_path):
    assert lint_project(tmp_path, {"decoders.py": textwrap.dedent(DECODERS)}, ["TL104"]) == []


def test_tokenizers_that_also_encode_are_still_compared(tmp_path):
    src = textwrap.dedent(DECODERS) + textwrap.indent(textwrap.dedent('''
        def encode(self, texts):
            return self.wp_tokenizer(texts, padding=True), self.bpe_tokenizer(texts, padding=True)
    '''), "    ")
    got = lint_project(tmp_path, {"decoders.py": src}, ["TL104"])
    assert sorted(line for _, line, _ in got) == [7, 8]


def test_a_model_given_the_checkpoint_by_keyword_is_a_model_of_its_own(tmp_path):
    """Example scripts that one driver imports, each building its model from the tokenizer's
    checkpoint through a wrapper class or factory (`pretrained_model_name_or_path=`,
    `model=`, `backbone=`), are not compared; a wrapper given another checkpoint than the
    tokenizer's does not make the tokenizer its model's."""
    files = {
        "language_modeling.py": """
            from transformers import AutoTokenizer
            from lightning_transformers.task.nlp.language_modeling import LanguageModelingTransformer

            tokenizer = AutoTokenizer.from_pretrained(pretrained_model_name_or_path="gpt2")
            model = LanguageModelingTransformer(pretrained_model_name_or_path="gpt2")
        """,
        "classify.py": """
            from transformers import AutoTokenizer, pipeline

            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            classifier = pipeline("text-classification", model="bert-base-uncased", tokenizer=tokenizer)
        """,
        "tagging.py": """
            from transformers import AutoTokenizer
            from tagger import Tagger

            tokenizer = AutoTokenizer.from_pretrained("roberta-base")
            tagger = Tagger(backbone="roberta-base", num_labels=9)
        """,
    }
    assert lint_project(tmp_path / "examples", _program(files, "run_examples.py"), [CODE]) == []
    files["serve.py"] = """
        from transformers import AutoTokenizer
        from tagger import Tagger

        tokenizer = AutoTokenizer.from_pretrained("roberta-large")  # expect: TL104
        tagger = Tagger(backbone="roberta-base", tokenizer_name="roberta-large")
    """
    found_lines = lint_project(tmp_path / "mismatch", _program(files, "run_examples.py"), [CODE])
    # serve.py's tokenizer has no model of its own: it is compared with (and differs from) each
    assert set(found_lines) == {("serve.py", 4, CODE), ("language_modeling.py", 4, CODE),
                                ("classify.py", 3, CODE), ("tagging.py", 4, CODE)}


def test_tokenizers_in_alternatives_of_one_file_are_not_compared(tmp_path):
    src = """
        import sys

        from transformers import AutoTokenizer

        mode = sys.argv[1]
        if mode == "bert":
            tok = AutoTokenizer.from_pretrained("bert-base-uncased")
        elif mode == "gpt":
            tok = AutoTokenizer.from_pretrained("gpt2", padding_side="left")
        else:
            tok = AutoTokenizer.from_pretrained("roberta-base")
        other = AutoTokenizer.from_pretrained("t5-small") if mode == "t5" else AutoTokenizer.from_pretrained("t5-base")
        match mode:
            case "x":
                third = AutoTokenizer.from_pretrained("xlnet-base-cased")
            case _:
                third = AutoTokenizer.from_pretrained("xlnet-large-cased")
        try:
            fourth = AutoTokenizer.from_pretrained("./finetuned")
        except OSError:
            fourth = AutoTokenizer.from_pretrained("distilgpt2")
    """
    found_lines = {}
    for first, last in ((6, 11), (12, 12), (13, 17), (18, 21)):
        lines = textwrap.dedent(src).lstrip("\n").splitlines()
        kept = lines[:5] + lines[first - 1:last]
        (tmp_path / f"case{first}").mkdir()
        found_lines[first] = set(lint_project(tmp_path / f"case{first}", {"m.py": "\n".join(kept) + "\n"}, [CODE]))
    assert found_lines == {6: set(), 12: set(), 13: set(), 18: set()}


def test_two_arms_of_different_statements_are_compared(tmp_path):
    src = """
        import sys

        from transformers import AutoTokenizer

        if sys.argv[1] == "train":
            tok = AutoTokenizer.from_pretrained("bert-base-uncased")
        if sys.argv[2] == "eval":
            tok = AutoTokenizer.from_pretrained("bert-base-cased")
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 6, CODE), ("m.py", 8, CODE)}


def test_a_peft_adapter_or_a_model_factory_loads_the_model_from_the_checkpoint(tmp_path):
    files = {
        "merge.py": """
            from peft import PeftConfig, PeftModel
            from transformers import AutoModelForCausalLM, AutoTokenizer

            adapter_id = "someone/tinyllama-lora-sql"
            config = PeftConfig.from_pretrained(adapter_id)
            model = AutoModelForCausalLM.from_pretrained(config.base_model_name_or_path)
            tokenizer = AutoTokenizer.from_pretrained(adapter_id)
            model = PeftModel.from_pretrained(model, adapter_id)
        """,
        "quantize.py": """
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


            def get_model(*args, **kwargs):
                return AutoModelForSeq2SeqLM.from_pretrained(*args, **kwargs)


            tokenizer = AutoTokenizer.from_pretrained("t5-base")
            reference = get_model("t5-base")
        """,
        "infer.py": """
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-hf")
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
        """,
    }
    assert set(lint_project(tmp_path, _program(files), [CODE])) == set()
    files["merge.py"] = files["merge.py"].replace("model = PeftModel.from_pretrained(model, adapter_id)", "")
    (tmp_path / "again").mkdir()
    found_files = {path for path, _, _ in lint_project(tmp_path / "again", _program(files), [CODE])}
    assert found_files == {"merge.py", "infer.py", "quantize.py"}  # the adapter is no longer loaded


@pytest.mark.parametrize("second, reported", [
    # each script builds its model from its tokenizer's family: independent
    ('config = AutoConfig.from_pretrained("bert-base-cased", num_hidden_layers=2)\n'
     'model = AutoModel.from_config(config)', False),
    ('generation_config = GenerationConfig.from_pretrained("bert-base-cased")', False),
    # the second script's model is another checkpoint's (or a saved folder's): one pipeline
    ('config = AutoConfig.from_pretrained("roberta-base")\nmodel = AutoModel.from_config(config)', True),
    ('model = AutoModel.from_pretrained("out/")', True),
])
def test_a_model_built_from_the_tokenizers_configuration(tmp_path, second, reported):
    first = ('from transformers import AutoConfig, AutoModel, AutoTokenizer\n\n'
             'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")\n'
             'config = AutoConfig.from_pretrained("bert-base-uncased", num_hidden_layers=2)\n'
             'model = AutoModel.from_config(config)\n')
    other = ('from transformers import AutoConfig, AutoModel, AutoTokenizer, GenerationConfig\n\n'
             'tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")\n' + second + '\n')
    got = set(lint_project(tmp_path, _program({"tiny/make_a.py": first, "tiny/make_b.py": other}), [CODE]))
    assert got == ({("tiny/make_a.py", 3, CODE), ("tiny/make_b.py", 3, CODE)} if reported else set())
