import sys

from bench.fleet.cli import main

sys.exit(main())
