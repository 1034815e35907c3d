"""The shared views every rule builds on: bindings and default-run values (`bindings`),
calls and callers (`calls`), model structure (`model`), training steps (`training`), the
data pipeline (`data`) and project facts (`facts`). Each is computed lazily from the file
index, once per file.

Each registers itself as a `FileContext` view (`tlint.context.register_view`); importing
this package registers them all.
"""

from tlint.views import bindings, calls, data, facts, model, training  # noqa: F401 - registers the views
