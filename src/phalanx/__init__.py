"""phalanx — a gang scheduler for AI and HPC batch work on Kubernetes.

Layers, lowest first (enforced by import-linter, see pyproject.toml):
``api`` (pure data) → ``k8s`` (manifest conversion) → ``cluster`` (columnar state) →
``framework`` (session, statement, plugin protocols) → ``plugins`` → ``actions`` →
``policies`` → ``sim`` → ``cli``.
"""

__version__ = "0.1.0"
