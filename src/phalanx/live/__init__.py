"""Placeholder: the live Kubernetes scheduler (issue: phalanx serve)."""
