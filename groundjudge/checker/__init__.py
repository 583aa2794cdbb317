"""The local checker: the NLI model (or another grounding classifier), evidence selection, text signals, the
verdict head and the profile file beside the weights.

It knows the model, not the run: never imports ``config``, ``stages``, ``pipeline``, ``runs``, ``learn``,
``review`` or ``cli``.
"""
