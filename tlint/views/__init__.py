"""The three shared views every rule builds on: project facts (`facts`), model structure
(`model`), and training steps (`training`). Each is computed lazily from the file index."""
