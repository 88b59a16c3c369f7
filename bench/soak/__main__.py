import sys

from bench.soak.cli import main

sys.exit(main())
