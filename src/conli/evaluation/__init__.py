"""The evaluation harness behind ``conli eval``: loaders, metrics, runs and reports."""
