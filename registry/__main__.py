"""``python -m registry`` = ``iot-devices``."""

import sys

from registry.cli import main

sys.exit(main())
