"""Resolve names through a file's imports and aliases (cheaply: no LibCST scope analysis).

`ImportTable.qualify(expr)` turns `nn.utils.clip_grad_norm_` into
`torch.nn.utils.clip_grad_norm_` when the file did `from torch import nn`, and into the
same name for `from torch.nn.utils import clip_grad_norm_ as clip` / `clip`.
Re-export paths are folded to the public name (`torch.nn.modules.linear.Linear` ->
`torch.nn.Linear`, `pytorch_lightning.Trainer` -> `lightning.pytorch.Trainer`).
"""

from __future__ import annotations

import libcst as cst

from tlint.cst import dotted_name

# Packages whose public names are re-exported at the top level: fold deep paths to it.
_FLAT_PACKAGES = ("transformers.", "accelerate.", "peft.", "trl.")


def _module_name(node: cst.BaseExpression | None) -> str:
    name = dotted_name(node) if node is not None else None
    return name or ""


def canonical(name: str) -> str:
    """Fold known re-export paths to the public spelling."""
    if name.startswith("pytorch_lightning"):
        name = "lightning.pytorch" + name[len("pytorch_lightning"):]
    elif (name.startswith("lightning.") and not name.startswith("lightning.pytorch")
          and not name.startswith("lightning.fabric")):
        name = "lightning.pytorch." + name[len("lightning."):]
    if name.startswith("torch.nn.modules."):
        parts = name.split(".")
        if len(parts) > 4:
            return "torch.nn." + ".".join(parts[4:])
    if name.startswith("torch.nn.utils.clip_grad."):
        return "torch.nn.utils." + name[len("torch.nn.utils.clip_grad."):]
    if name.startswith("torch.optim."):
        parts = name.split(".")
        if len(parts) == 4 and parts[2] != "lr_scheduler" and parts[2].islower():
            return "torch.optim." + parts[3]
    if name.startswith("lightning.pytorch.") and name.count(".") > 2:
        last = name.rsplit(".", 1)[1]
        if last[:1].isupper():
            return "lightning.pytorch." + last
    for prefix in _FLAT_PACKAGES:
        if name.startswith(prefix) and name.count(".") > 1:
            # `transformers.models.bert.modeling_bert.BertModel.from_pretrained` ->
            # `transformers.BertModel.from_pretrained`; `transformers.optimization.get_scheduler`
            # -> `transformers.get_scheduler`; `transformers.AutoTokenizer.from_pretrained` stays.
            parts = name[len(prefix):].split(".")
            first_class = next((i for i, part in enumerate(parts) if part[:1].isupper()), None)
            kept = parts[first_class:] if first_class is not None else parts[-1:]
            return prefix + ".".join(kept)
    return name


class ImportTable:
    """Local name -> fully qualified name, from the file's imports and simple aliases."""

    __slots__ = ("aliases", "modules")

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.modules: list[str] = []  # modules imported (absolute or `.relative`)

    def add_import(self, node: cst.Import) -> None:
        if type(node.names) is cst.ImportStar:
            return
        for alias in node.names:
            full = _module_name(alias.name)
            self.modules.append(full)
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".", 1)[0]
                self.aliases[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        module = "." * len(node.relative) + _module_name(node.module)
        self.modules.append(module)
        if isinstance(node.names, cst.ImportStar):  # (isinstance: mypy narrows the `for` below)
            return
        sep = "" if module.endswith(".") else "."
        for alias in node.names:
            imported = _module_name(alias.name)
            local = imported
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self.aliases[local] = f"{module}{sep}{imported}"

    def add_assignment_alias(self, target: str, value: cst.BaseExpression) -> None:
        """`clip = torch.nn.utils.clip_grad_norm_` at module level aliases `clip`."""
        qualified = self.qualify(value)
        if qualified is not None:
            self.aliases[target] = qualified

    def qualify(self, expr: cst.BaseExpression | None) -> str | None:
        """The qualified name of a Name/Attribute chain rooted in an import, else None."""
        name = dotted_name(expr)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        return canonical(f"{target}.{rest}" if rest else target)

    def imports_module(self, prefix: str) -> bool:
        return any(m == prefix or m.startswith(prefix + ".") for m in self.modules)
