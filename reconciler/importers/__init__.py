"""Translators from other tools' configurations into kmirror's desired state (pure: text in, text out)."""
