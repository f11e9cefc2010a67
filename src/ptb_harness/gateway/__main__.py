"""``python -m ptb_harness.gateway``: one cell's LLM gateway (see ptb_harness.gateway.main)."""

import sys

from ptb_harness.gateway.main import main

sys.exit(main())
