import sys

from bench.chaos.cli import main

sys.exit(main())
