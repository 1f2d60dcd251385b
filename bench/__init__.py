"""Benchmarks for flask-sqs-jobs: ``python -m bench`` from the repository root."""
