"""TL104 tokenizer-mismatch: related files build their tokenizers from different checkpoints
or with different settings (cross-file, on the `tokenizer` facts)."""

from __future__ import annotations

from tlint.rules.base import Rule, listing
from tlint.views.facts import TOKENIZER_OPTIONS

# Library defaults, so that `padding_side="left"` differs from a tokenizer that leaves it out.
# Options whose default depends on the checkpoint (`model_max_length`, `do_lower_case`)
# are compared only when both tokenizers set them.
_DEFAULTS = {"use_fast": True, "padding_side": "right", "truncation_side": "right", "add_prefix_space": False}
_LOCAL_PREFIXES = ("/", "./", "../", "~")


def _exclusive(a, b) -> bool:
    """Different arms of one `if`/`match`/`try` (see `TokenizerFact.arms`)."""
    arms = dict(a)
    return any(where in arms and arms[where] != arm for where, arm in b)


class TokenizerMismatch(Rule):
    code = "TL104"
    name = "tokenizer-mismatch"
    kind = "practice"
    tokens = frozenset()  # pre-filter: cross-file only, on the `tokenizer` facts (their extractor's tokens)
    summary = "Files of one program build tokenizers from different checkpoints or with different settings."
    verify_site = "data"
    data_check = "tokenizer-agreement"

    # Only a file that builds a tokenizer is reported at, and only these facts are compared.
    project_kinds = ("tokenizer",)
    project_facts = ("tokenizer", "tokenizer-saved")
    # one program: files that import one another, or that one script imports (a folder is not a program)
    project_scope = "program"

    def project_index(self, related):
        saved = {fact.data.folder for facts in related.values() for fact in facts if fact.kind == "tokenizer-saved"}
        tokenizers = [(other, fact) for other, facts in sorted(related.items())
                      for fact in facts if fact.kind == "tokenizer" and not self._reloaded(fact, saved)]
        return saved, tokenizers

    def check_project(self, path, related):
        saved, tokenizers = self.indexed(related)
        for fact in related.get(path, []):
            if fact.kind != "tokenizer" or self._reloaded(fact, saved):
                continue
            differences = []
            for other_path, other in tokenizers:
                if other is fact:
                    continue
                reason = self._difference(fact, other, same_file=other_path == path)
                if reason:
                    differences.append(f"{related.place(other_path, other.range, path)} ({reason})")
            if differences:
                places = listing(differences)
                yield fact.range, (f"this tokenizer differs from the one built at {places}: text is encoded "
                                   "differently in training and evaluation/inference (other ids, padding or "
                                   "truncation side); build one tokenizer and share it"), places

    @staticmethod
    def _reloaded(fact, saved: set) -> bool:
        """Not compared: no literal checkpoint (a variable, a CLI argument), a folder the
        project saves to, a test file (tests load whatever small checkpoint they need), or a
        tokenizer only used to decode ids (each decoding head has its own vocabulary)."""
        checkpoint = fact.data.checkpoint
        if checkpoint is None or fact.data.test_file or fact.data.decode_only:
            return True
        return checkpoint.rstrip("/") in saved or (None in saved and checkpoint.startswith(_LOCAL_PREFIXES))

    @staticmethod
    def _difference(a, b, *, same_file: bool) -> str | None:
        if same_file and _exclusive(a.data.arms, b.data.arms):
            return None  # `if args.model == "bert": ... else: ...`: never both in one run
        if a.data.checkpoint != b.data.checkpoint:
            # each loaded next to its own model (teacher/student, two independent scripts)
            if a.data.with_model and b.data.with_model and (not same_file or a.data.var != b.data.var):
                return None
            return f'checkpoint "{a.data.checkpoint}" vs "{b.data.checkpoint}"'
        if "**" in a.data.dynamic or "**" in b.data.dynamic:
            return None
        for key in TOKENIZER_OPTIONS:
            if key in a.data.dynamic or key in b.data.dynamic:
                continue
            missing = object()
            va = a.data.options.get(key, _DEFAULTS.get(key, missing))
            vb = b.data.options.get(key, _DEFAULTS.get(key, missing))
            if va is missing or vb is missing or va == vb:
                continue
            return f"{key}={va!r} vs {vb!r}"
        return None
