import sys

from ptb_harness.cli import main

sys.exit(main())
