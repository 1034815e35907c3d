"""The three shared views every rule builds on: project facts (`facts`), model structure
(`model`), and training steps (`training`). Each is computed lazily from the file index.

Each registers itself as a `FileContext` view (`tlint.context.register_view`); importing
this package registers them all.
"""

from tlint.views import bindings, calls, data, facts, model, training  # noqa: F401 - registers the views
