"""Processes and runtimes: budgeted child processes, the sandbox runtimes the agent and the
scorer run in, the HF cache view, the frozen harness snapshot and the scheduler's job."""
