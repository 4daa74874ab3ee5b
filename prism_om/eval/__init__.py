"""The quality harness behind ``prism-om eval``: memory benchmarks in the LoCoMo and
LongMemEval formats, offline or with a model."""
